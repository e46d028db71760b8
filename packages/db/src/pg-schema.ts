import { getTableColumns, getTableName, is, SQL, StringChunk, sql } from "drizzle-orm";
import {
  bigint,
  customType,
  index,
  integer,
  type PgColumn,
  type PgColumnBuilderBase,
  type PgTable,
  pgTable,
  text,
  type UpdateDeleteAction,
  uniqueIndex,
} from "drizzle-orm/pg-core";
import { type ForeignKey, getTableConfig, type SQLiteColumn, type SQLiteTable } from "drizzle-orm/sqlite-core";
import * as sqlite from "./schema.ts";

/**
 * The PostgreSQL schema, built from the tables of schema.ts (their one declaration) for
 * drizzle-kit to generate the PostgreSQL migrations from. Queries are written once, against
 * the table objects of schema.ts, and run on either dialect: drizzle's PostgreSQL dialect
 * renders any drizzle table. test/schema-drift.test.ts compares the databases both dialects'
 * migrations build with each other and with schema.ts.
 *
 * Every column is `text` or `integer` in both dialects (an AUTOINCREMENT key: `bigint` identity;
 * the bytes of a stored package: `blob`, `bytea`), so a value reads back the same bytes:
 * JSON documents are text (drizzle's JSON mode of schema.ts reads and writes them; `jsonb`
 * would reorder their keys), timestamps are ISO-8601 text, flags 0/1 integers. A column type
 * or SQL default this file does not know stops it loading, naming the column: add its
 * PostgreSQL form here rather than let the dialects differ silently.
 */

/** Each SQL default of schema.ts, by its SQLite text, in PostgreSQL's words. */
const SQL_DEFAULTS: Record<string, SQL> = {
  "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))": sql`to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
};

const twins = new Map<SQLiteTable, PgTable>();

function sqlText(value: SQL): string {
  return value.queryChunks.map((chunk) => (is(chunk, StringChunk) ? chunk.value.join("") : "?")).join("");
}

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => "bytea" });

/** What this file asks of a PostgreSQL column builder, the same for text and integer columns. */
interface ColumnBuilder extends PgColumnBuilderBase {
  primaryKey(): ColumnBuilder;
  notNull(): ColumnBuilder;
  unique(name?: string): ColumnBuilder;
  default(value: unknown): ColumnBuilder;
  references(
    ref: () => PgColumn,
    actions: { onDelete?: UpdateDeleteAction; onUpdate?: UpdateDeleteAction },
  ): ColumnBuilder;
}

function pgColumn(table: string, column: SQLiteColumn, fk: ForeignKey | undefined): ColumnBuilder {
  const at = `${table}.${column.name}`;
  let builder: ColumnBuilder;
  if (column.columnType === "SQLiteText" || column.columnType === "SQLiteTextJson") {
    builder = text(column.name) as unknown as ColumnBuilder;
  } else if (column.columnType === "SQLiteInteger" && (column as { autoIncrement?: boolean }).autoIncrement) {
    // SQLite's AUTOINCREMENT key (never reused): a 64-bit identity, since 32 bits of event ids
    // run out within months. postgres.js reads int8 as a string; its readers take Number().
    builder = bigint(column.name, { mode: "number" }).generatedAlwaysAsIdentity() as unknown as ColumnBuilder;
  } else if (column.columnType === "SQLiteInteger" && sqlite.WIDE_INTEGERS.has(at)) {
    builder = bigint(column.name, { mode: "number" }) as unknown as ColumnBuilder;
  } else if (column.columnType === "SQLiteInteger") {
    builder = integer(column.name) as unknown as ColumnBuilder;
  } else if (column.columnType === "SQLiteBlobBuffer") {
    // Bytes (a stored package's chunks): bytea, which postgres.js reads back as a Buffer.
    builder = bytea(column.name) as unknown as ColumnBuilder;
  } else {
    throw new Error(`pg-schema: ${at} is ${column.columnType}, which has no PostgreSQL form here`);
  }
  if (column.primary) builder = builder.primaryKey();
  if (column.notNull) builder = builder.notNull();
  if (column.isUnique) builder = builder.unique(column.uniqueName);
  if (is(column.default, SQL)) {
    const pg = SQL_DEFAULTS[sqlText(column.default)];
    if (pg === undefined) throw new Error(`pg-schema: ${at} has the SQL default ${sqlText(column.default)}`);
    builder = builder.default(pg);
  } else if (column.default !== undefined) {
    builder = builder.default(column.default);
  }
  if (fk) {
    const ref = fk.reference();
    const [to, ...more] = ref.foreignColumns;
    if (!to || more.length > 0 || ref.columns.length !== 1)
      throw new Error(`pg-schema: ${at} is in a foreign key of several columns`);
    builder = builder.references(() => columnOf(ref.foreignTable, to.name), {
      onDelete: fk.onDelete,
      onUpdate: fk.onUpdate,
    });
  }
  return builder;
}

/** The PostgreSQL column that stands for a schema.ts table's column (a foreign key's target). */
function columnOf(table: SQLiteTable, name: string): PgColumn {
  const twin = twins.get(table);
  const column = twin && Object.values(getTableColumns(twin)).find((c) => c.name === name);
  if (!column) throw new Error(`pg-schema: no PostgreSQL column ${getTableName(table)}.${name}`);
  return column;
}

/** The PostgreSQL table of one schema.ts table: its columns, unique keys, indexes and foreign keys. */
function pgTwin(table: SQLiteTable): PgTable {
  const config = getTableConfig(table);
  const fks = new Map(config.foreignKeys.map((fk) => [fk.reference().columns[0]?.name, fk]));
  const columns = Object.fromEntries(
    Object.entries(getTableColumns(table)).map(([key, column]) => [
      key,
      pgColumn(config.name, column, fks.get(column.name)),
    ]),
  );
  const twin = pgTable(config.name, columns, (t) =>
    config.indexes.map((i) => {
      const on = i.config.columns.map((c) => {
        if (is(c, SQL)) throw new Error(`pg-schema: index ${i.config.name} is on an expression`);
        return Object.values(t).find((column) => column.name === c.name);
      });
      const [first, ...rest] = on;
      if (!first || rest.some((c) => !c)) throw new Error(`pg-schema: index ${i.config.name} names an unknown column`);
      return (i.config.unique ? uniqueIndex(i.config.name) : index(i.config.name)).on(first, ...(rest as PgColumn[]));
    }),
  );
  twins.set(table, twin);
  return twin;
}

export const projects = pgTwin(sqlite.projects);
export const users = pgTwin(sqlite.users);
export const tokens = pgTwin(sqlite.tokens);
export const joinTokens = pgTwin(sqlite.joinTokens);
export const cloudProviders = pgTwin(sqlite.cloudProviders);
export const nodePools = pgTwin(sqlite.nodePools);
export const clusters = pgTwin(sqlite.clusters);
export const nodes = pgTwin(sqlite.nodes);
export const operations = pgTwin(sqlite.operations);
export const externalClusters = pgTwin(sqlite.externalClusters);
export const addons = pgTwin(sqlite.addons);
export const clusterAccessTokens = pgTwin(sqlite.clusterAccessTokens);
export const auditEvents = pgTwin(sqlite.auditEvents);
export const keelsonSchema = pgTwin(sqlite.keelsonSchema);
export const replicas = pgTwin(sqlite.replicas);
export const webcliSpentTokens = pgTwin(sqlite.webcliSpentTokens);
export const loginFailures = pgTwin(sqlite.loginFailures);
export const agentLinks = pgTwin(sqlite.agentLinks);
export const hostPresence = pgTwin(sqlite.hostPresence);
export const agentCommands = pgTwin(sqlite.agentCommands);
export const events = pgTwin(sqlite.events);
export const clusterChanges = pgTwin(sqlite.clusterChanges);
export const sharedSecrets = pgTwin(sqlite.sharedSecrets);
export const instanceTokenChecks = pgTwin(sqlite.instanceTokenChecks);
export const storedPackages = pgTwin(sqlite.storedPackages);
export const storedPackageChunks = pgTwin(sqlite.storedPackageChunks);
