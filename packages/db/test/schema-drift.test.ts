import { getTableName, type InferInsertModel, type InferSelectModel, type Table } from "drizzle-orm";
import { getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import { getTableConfig as sqliteConfig } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import * as pg from "../src/pg-schema.ts";
import * as sqlite from "../src/schema.ts";

/**
 * The two schemas are one shape: queries are written against schema.ts and run on PostgreSQL
 * too, so every table, column, key and index must exist in both with the same row types.
 */

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Same<A extends Table, B extends Table> =
  Equal<InferSelectModel<A>, InferSelectModel<B>> extends true
    ? Equal<InferInsertModel<A>, InferInsertModel<B>>
    : false;

// Compile-time: the row types of each table are equal (a drift fails `pnpm typecheck`).
const rowTypesMatch = {
  projects: true,
  users: true,
  tokens: true,
  joinTokens: true,
  cloudProviders: true,
  nodePools: true,
  clusters: true,
  nodes: true,
  operations: true,
  externalClusters: true,
  addons: true,
  clusterAccessTokens: true,
  auditEvents: true,
  keelsonSchema: true,
} satisfies { [K in keyof typeof pg]: Same<(typeof sqlite)[K], (typeof pg)[K]> };

const sqliteTables = Object.fromEntries(Object.entries(sqlite).filter(([, value]) => isTable(value))) as Record<
  string,
  Table
>;

function isTable(value: unknown): value is Table {
  try {
    return typeof getTableName(value as Table) === "string";
  } catch {
    return false;
  }
}

interface Shape {
  columns: Record<string, { notNull: boolean; hasDefault: boolean; primary: boolean; unique: boolean; type: string }>;
  indexes: string[];
  foreignKeys: string[];
}

/** What both dialects' table configs have in common: the parts a query depends on. */
type TableConfig = Pick<
  ReturnType<typeof sqliteConfig> | ReturnType<typeof pgConfig>,
  "columns" | "indexes" | "foreignKeys"
>;

function shapeOf(config: TableConfig): Shape {
  return {
    columns: Object.fromEntries(
      config.columns.map((c) => [
        c.name,
        {
          notNull: c.notNull,
          hasDefault: c.hasDefault,
          primary: c.primary,
          unique: c.isUnique,
          type: c.getSQLType().toLowerCase(),
        },
      ]),
    ),
    indexes: config.indexes
      .map((i) => {
        const columns = i.config.columns.map((c) => ("name" in c ? c.name : "(expression)"));
        return `${i.config.name}:${i.config.unique}:${columns.join(",")}`;
      })
      .sort(),
    foreignKeys: config.foreignKeys
      .map((fk) => {
        const ref = fk.reference();
        const to = `${getTableName(ref.foreignTable)}(${ref.foreignColumns.map((c) => c.name).join(",")})`;
        return `${ref.columns.map((c) => c.name).join(",")}->${to} on delete ${fk.onDelete ?? "no action"}`;
      })
      .sort(),
  };
}

describe("the SQLite and PostgreSQL schemas", () => {
  it("have the same tables", () => {
    expect(Object.keys(rowTypesMatch).sort()).toEqual(Object.keys(sqliteTables).sort());
    expect(Object.values(sqliteTables).map(getTableName).sort()).toEqual(
      Object.keys(rowTypesMatch)
        .map((key) => getTableName((pg as unknown as Record<string, Table>)[key] as Table))
        .sort(),
    );
  });

  it.each(Object.keys(rowTypesMatch))("have the same columns, keys and indexes in %s", (key) => {
    const a = shapeOf(sqliteConfig(sqliteTables[key] as Parameters<typeof sqliteConfig>[0]));
    const b = shapeOf(pgConfig((pg as unknown as Record<string, Table>)[key] as Parameters<typeof pgConfig>[0]));
    expect(b).toEqual(a);
  });
});
