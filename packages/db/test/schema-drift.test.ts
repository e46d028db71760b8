import Database from "better-sqlite3";
import { getTableName, is, SQL, type Table } from "drizzle-orm";
import { drizzle as sqliteDrizzle } from "drizzle-orm/better-sqlite3";
import { migrate as sqliteMigrate } from "drizzle-orm/better-sqlite3/migrator";
import { drizzle as pgDrizzle } from "drizzle-orm/postgres-js";
import { migrate as pgMigrate } from "drizzle-orm/postgres-js/migrator";
import { getTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropDatabase, freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import * as schema from "../src/schema.ts";
import { MIGRATIONS } from "../src/store/index.ts";

/**
 * Queries are written once, against schema.ts, and run on both dialects, so the database each
 * dialect's migrations build must be the one schema.ts declares: every table, column (type,
 * null, default, key), index and foreign key. Read from the migrated databases' own catalogs,
 * this fails on a schema change whose migrations were not generated, on a hand edit of one
 * dialect's migrations, and on a translation in pg-schema.ts that gets a column wrong.
 */

interface Column {
  type: string;
  notNull: boolean;
  primary: boolean;
  /** A literal default as SQL writes it (`'ok'`, `0`), `(expression)` for a computed one, or null. */
  default: string | null;
}

interface Shape {
  columns: Record<string, Column>;
  /** `name:unique:col,col`, primary keys left out. */
  indexes: string[];
  /** `col->table(col) on delete action`. */
  foreignKeys: string[];
}

type Catalog = Record<string, Shape>;

function literal(value: string | null): string | null {
  if (value === null) return null;
  const bare = value.replace(/::[a-z ]+$/, "");
  return bare.includes("(") ? "(expression)" : bare;
}

const declared: Catalog = Object.fromEntries(
  (Object.values(schema) as unknown[])
    .filter((value): value is SQLiteTable => isTable(value))
    .map((table) => {
      const config = getTableConfig(table);
      const uniques = config.columns.filter((c) => c.isUnique).map((c) => `${c.uniqueName}:true:${c.name}`);
      const shape: Shape = {
        columns: Object.fromEntries(
          config.columns.map((c) => [
            c.name,
            {
              type: c.getSQLType().toLowerCase(),
              notNull: c.notNull,
              primary: c.primary,
              default: is(c.default, SQL)
                ? "(expression)"
                : c.default === undefined
                  ? null
                  : typeof c.default === "string"
                    ? `'${c.default}'`
                    : String(c.default),
            },
          ]),
        ),
        indexes: [
          ...uniques,
          ...config.indexes.map(
            (i) =>
              `${i.config.name}:${i.config.unique}:${i.config.columns.map((c) => ("name" in c ? c.name : "?")).join(",")}`,
          ),
        ].sort(),
        foreignKeys: config.foreignKeys
          .map((fk) => {
            const ref = fk.reference();
            const to = `${getTableName(ref.foreignTable)}(${ref.foreignColumns.map((c) => c.name).join(",")})`;
            return `${ref.columns.map((c) => c.name).join(",")}->${to} on delete ${fk.onDelete ?? "no action"}`;
          })
          .sort(),
      };
      return [config.name, shape];
    }),
);

/** The same on PostgreSQL, where an AUTOINCREMENT key and WIDE_INTEGERS are 64-bit and bytes are bytea (pg-schema.ts). */
const pgDeclared: Catalog = Object.fromEntries(
  Object.entries(declared).map(([name, shape]) => {
    const table = (Object.values(schema) as unknown[]).find(
      (value): value is SQLiteTable => isTable(value) && getTableName(value) === name,
    );
    const wide = new Set(
      getTableConfig(table as SQLiteTable)
        .columns.filter(
          (c) => (c as { autoIncrement?: boolean }).autoIncrement || schema.WIDE_INTEGERS.has(`${name}.${c.name}`),
        )
        .map((c) => c.name),
    );
    const columns = Object.fromEntries(
      Object.entries(shape.columns).map(([c, column]) => [
        c,
        wide.has(c) ? { ...column, type: "bigint" } : column.type === "blob" ? { ...column, type: "bytea" } : column,
      ]),
    );
    return [name, { ...shape, columns }];
  }),
);

function isTable(value: unknown): value is Table {
  try {
    return typeof getTableName(value as Table) === "string";
  } catch {
    return false;
  }
}

function sqliteCatalog(db: Database.Database): Catalog {
  const tables = db
    .prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '__drizzle%'",
    )
    .pluck()
    .all() as string[];
  return Object.fromEntries(
    tables.map((table) => {
      const columns = db.prepare("SELECT * FROM pragma_table_info(?)").all(table) as {
        name: string;
        type: string;
        notnull: number;
        dflt_value: string | null;
        pk: number;
      }[];
      const indexes = (
        db.prepare("SELECT * FROM pragma_index_list(?)").all(table) as {
          name: string;
          unique: number;
          origin: string;
        }[]
      )
        .filter((i) => i.origin !== "pk")
        .map((i) => {
          const on = db.prepare("SELECT name FROM pragma_index_info(?) ORDER BY seqno").pluck().all(i.name);
          return `${i.name}:${i.unique === 1}:${on.join(",")}`;
        });
      const fks = db.prepare("SELECT * FROM pragma_foreign_key_list(?)").all(table) as {
        table: string;
        from: string;
        to: string;
        on_delete: string;
      }[];
      const shape: Shape = {
        columns: Object.fromEntries(
          columns.map((c) => [
            c.name,
            {
              type: c.type.toLowerCase(),
              notNull: c.notnull === 1 || c.pk > 0,
              primary: c.pk > 0,
              default: literal(c.dflt_value),
            },
          ]),
        ),
        indexes: indexes.sort(),
        foreignKeys: fks
          .map((fk) => `${fk.from}->${fk.table}(${fk.to}) on delete ${fk.on_delete.toLowerCase()}`)
          .sort(),
      };
      return [table, shape];
    }),
  );
}

const PG_ACTIONS: Record<string, string> = {
  a: "no action",
  r: "restrict",
  c: "cascade",
  n: "set null",
  d: "set default",
};

async function pgCatalog(client: postgres.Sql): Promise<Catalog> {
  const columns = await client<
    { table: string; name: string; type: string; nullable: string; default: string | null; primary: boolean }[]
  >`
    SELECT c.table_name AS table, c.column_name AS name, c.data_type AS type, c.is_nullable AS nullable,
           c.column_default AS default,
           EXISTS (
             SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
             WHERE i.indisprimary AND i.indrelid = format('public.%I', c.table_name)::regclass AND a.attname = c.column_name
           ) AS primary
    FROM information_schema.columns c WHERE c.table_schema = 'public'`;
  const indexes = await client<{ table: string; name: string; unique: boolean; columns: string[] }[]>`
    SELECT t.relname AS table, x.relname AS name, i.indisunique AS unique,
           array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)::text[] AS columns
    FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
    JOIN pg_namespace s ON s.oid = t.relnamespace
    WHERE s.nspname = 'public' AND NOT i.indisprimary`;
  const fks = await client<{ table: string; from: string; to_table: string; to: string; action: string }[]>`
    SELECT t.relname AS table, a.attname AS from, f.relname AS to_table, fa.attname AS to, c.confdeltype AS action
    FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_class f ON f.oid = c.confrelid
    JOIN pg_namespace s ON s.oid = t.relnamespace
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = c.confkey[1]
    WHERE c.contype = 'f' AND s.nspname = 'public'`;
  const catalog: Catalog = {};
  const shapeOf = (table: string): Shape => {
    catalog[table] ??= { columns: {}, indexes: [], foreignKeys: [] };
    return catalog[table];
  };
  for (const c of columns) {
    shapeOf(c.table).columns[c.name] = {
      type: c.type,
      notNull: c.nullable === "NO",
      primary: c.primary,
      default: literal(c.default),
    };
  }
  for (const i of indexes) shapeOf(i.table).indexes.push(`${i.name}:${i.unique}:${i.columns.join(",")}`);
  for (const fk of fks) {
    shapeOf(fk.table).foreignKeys.push(`${fk.from}->${fk.to_table}(${fk.to}) on delete ${PG_ACTIONS[fk.action]}`);
  }
  for (const shape of Object.values(catalog)) {
    shape.indexes.sort();
    shape.foreignKeys.sort();
  }
  return catalog;
}

describe("the databases each dialect's migrations build", () => {
  let sqlite: Database.Database;
  let pg: postgres.Sql;
  let pgUrl: string;

  beforeAll(async () => {
    sqlite = new Database(":memory:");
    sqliteMigrate(sqliteDrizzle(sqlite), { migrationsFolder: MIGRATIONS.sqlite });
    pgUrl = await freshDatabaseUrl();
    pg = postgres(pgUrl, { max: 1, onnotice: () => {} });
    await pgMigrate(pgDrizzle(pg), { migrationsFolder: MIGRATIONS.postgres });
  });

  afterAll(async () => {
    sqlite?.close();
    await pg?.end();
    if (pgUrl) await dropDatabase(pgUrl);
  });

  it("have the tables schema.ts declares", async () => {
    const tables = Object.keys(declared).sort();
    expect(tables.length).toBeGreaterThan(10);
    expect(Object.keys(sqliteCatalog(sqlite)).sort()).toEqual(tables);
    expect(Object.keys(await pgCatalog(pg)).sort()).toEqual(tables);
  });

  it.each(Object.keys(declared))("have the columns, keys and indexes schema.ts declares in %s", async (table) => {
    expect(sqliteCatalog(sqlite)[table]).toEqual(declared[table]);
    expect((await pgCatalog(pg))[table]).toEqual(pgDeclared[table]);
  });

  it("see a drift: a column, an index and a foreign key action changed on one side", async () => {
    const drifted = new Database(":memory:");
    try {
      sqliteMigrate(sqliteDrizzle(drifted), { migrationsFolder: MIGRATIONS.sqlite });
      drifted.exec("ALTER TABLE projects ADD COLUMN extra text");
      expect(sqliteCatalog(drifted).projects).not.toEqual(declared.projects);
    } finally {
      drifted.close();
    }
    await pg
      .begin(async (tx) => {
        await tx`DROP INDEX nodes_cluster`;
        await tx`ALTER TABLE nodes DROP CONSTRAINT nodes_cluster_id_clusters_id_fk`;
        await tx`ALTER TABLE nodes ADD CONSTRAINT nodes_cluster_id_clusters_id_fk FOREIGN KEY (cluster_id) REFERENCES clusters(id) ON DELETE CASCADE`;
        const nodes = (await pgCatalog(tx as unknown as postgres.Sql)).nodes;
        expect(nodes?.indexes).not.toEqual(declared.nodes?.indexes);
        expect(nodes?.foreignKeys).not.toEqual(declared.nodes?.foreignKeys);
        throw new Rollback();
      })
      .catch((error: unknown) => {
        if (!(error instanceof Rollback)) throw error;
      });
    expect((await pgCatalog(pg)).nodes).toEqual(declared.nodes);
  });
});

/** Undoes the seeded drift: thrown out of the transaction, it rolls the transaction back. */
class Rollback extends Error {}
