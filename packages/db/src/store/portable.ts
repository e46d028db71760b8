import { type SQL, type SQLWrapper, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db, Dialect, Tx } from "./types.ts";

/**
 * The few things queries need that the two dialects spell differently, in one place: which
 * dialect a database is, statements prepared once, and JSON built inside a query. Everything
 * else is the same drizzle call on both (see Db).
 */

const dialects = new WeakMap<object, Dialect>();

/**
 * Called by each store for its database, and for each transaction's `tx` it opens (see
 * markTransactions), so that code given either can ask.
 */
export function markDialect(db: Tx, dialect: Dialect): void {
  dialects.set(db, dialect);
}

/** Wraps `db.transaction` so that every `tx` it hands out knows its dialect too. */
export function markTransactions(db: Db, dialect: Dialect): void {
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn, config) =>
    transaction((tx) => {
      markDialect(tx, dialect);
      return fn(tx);
    }, config)) as Db["transaction"];
  markDialect(db, dialect);
}

/** The dialect of a store's database or of a transaction it opened. */
export function dialectOf(db: Tx): Dialect {
  const dialect = dialects.get(db);
  if (!dialect) throw new Error("dialectOf: not a store's database or transaction");
  return dialect;
}

/**
 * The rows `where` selects from `table`, locked until the transaction ends: the first step of
 * a "check, then write" that must hold when two requests do it at once. On PostgreSQL this is
 * `SELECT … FOR UPDATE` (a second transaction waits here until the first commits, then reads
 * what it wrote); on SQLite a transaction already holds the one connection (StatementGate), so
 * a plain read is enough. Rows are locked in id order, the order every writer of several rows
 * of a table takes them in (see lockIds).
 */
export function lockRows<T extends SQLiteTable & { id: SQLiteColumn }>(
  tx: Tx,
  table: T,
  where: SQL | undefined,
): Promise<T["$inferSelect"][]> {
  const query = tx
    .select()
    .from(table as SQLiteTable)
    .where(where)
    .orderBy(table.id);
  if (dialectOf(tx) === "sqlite") return query as Promise<T["$inferSelect"][]>;
  return (query as unknown as { for(strength: "update"): Promise<T["$inferSelect"][]> }).for("update");
}

/**
 * Locks the rows of `table` with these ids, in id order, before a statement that writes
 * several of them at once. One UPDATE over many rows takes their locks in whatever order its
 * plan visits them (a join's hash order, say), so two transactions that each write some of the
 * same rows, one of them in such a statement, can each hold a row the other waits for: a
 * deadlock, and PostgreSQL aborts one of them (an attach answered 503). Taking the locks in one
 * order first makes the second wait instead. Nothing to do on SQLite (one writer at a time).
 */
export async function lockIds<T extends SQLiteTable & { id: SQLiteColumn }>(
  tx: Tx,
  table: T,
  ids: readonly string[],
): Promise<void> {
  if (ids.length === 0 || dialectOf(tx) === "sqlite") return;
  const query = tx
    .select({ id: table.id })
    .from(table as SQLiteTable)
    .where(inJsonArray("postgres", table.id, ids))
    .orderBy(table.id);
  await (query as unknown as { for(strength: "update"): Promise<unknown> }).for("update");
}

/**
 * lockIds as a subquery of the write itself (PostgreSQL only): `(select id as locked_id from
 * table where id in ids order by id for update)`, which a statement over several rows joins on
 * `locked_id`, so that it takes its rows' locks in id order without a transaction, a statement
 * and two round trips of its own around it. Every row the statement writes must come through
 * the join: each is then locked, in order, before it is written.
 */
export function lockedInIdOrder<T extends SQLiteTable & { id: SQLiteColumn }>(table: T, ids: readonly string[]): SQL {
  return sql`(select ${table.id} as locked_id from ${table} where ${inJsonArray("postgres", table.id, ids)} order by ${table.id} for update)`;
}

/**
 * `write` (a statement over several rows of `table`, those with these ids) with the rows
 * locked in id order first (lockIds), in a transaction of its own on PostgreSQL. On SQLite,
 * or for one row, there is no order to keep and `write` runs as it is.
 */
export function writeInIdOrder<T extends SQLiteTable & { id: SQLiteColumn }, R>(
  db: Db,
  table: T,
  ids: readonly string[],
  write: (tx: Tx) => Promise<R>,
): Promise<R> {
  if (ids.length <= 1 || dialectOf(db) === "sqlite") return write(db);
  return db.transaction(async (tx) => {
    await lockIds(tx, table, ids);
    return write(tx);
  });
}

type Params = Record<string, unknown>;

/** A query built once and run many times with `sql.placeholder` values. */
export interface Prepared<Row> {
  all(params?: Params): Promise<Row[]>;
  get(params?: Params): Promise<Row | undefined>;
}

interface SqlitePrepared<Row> {
  all(params?: Params): Promise<Row[]>;
  get(params?: Params): Promise<Row | undefined>;
}
interface PgPrepared<Row> {
  execute(params?: Params): Promise<Row[]>;
}

/**
 * `build(db)` once per database, kept beside it: a module's prepared statements (`prepare`),
 * made at its first query on that database and dropped with it.
 */
export function perDatabase<T>(build: (db: Db) => T): (db: Db) => T {
  const made = new WeakMap<Db, T>();
  return (db) => {
    let value = made.get(db);
    if (value === undefined) {
      value = build(db);
      made.set(db, value);
    }
    return value;
  };
}

/**
 * Prepares a select once per database: building a drizzle query costs far more than running
 * it (`pnpm bench store`: 26–48 µs unprepared against 1.4–2.3 µs prepared on SQLite), so the
 * hot reads (token and credential lookups, cluster views) are built at start. On PostgreSQL
 * drizzle wants a statement name; postgres.js then prepares it on each pooled connection.
 */
export function prepare<Row>(db: Db, name: string, query: { prepare(): SqlitePrepared<Row> }): Prepared<Row> {
  if (dialectOf(db) === "sqlite") return query.prepare();
  const statement = (query as unknown as { prepare(name: string): PgPrepared<Row> }).prepare(name);
  return {
    all: (params) => statement.execute(params),
    get: async (params) => (await statement.execute(params))[0],
  };
}

/**
 * A scalar subquery giving the rows of `from` as one JSON array text of objects with `fields`
 * (keys in the order given), or null when there are none. SQLite's `json_group_array` and
 * PostgreSQL's `json_agg` (json, not jsonb, so key order stays).
 */
export function jsonArrayOf(dialect: Dialect, fields: Record<string, SQLWrapper>, from: SQL): SQL<string | null> {
  const pairs = sql.join(
    Object.entries(fields).map(([key, value]) => sql`${sql.raw(`'${key.replace(/'/g, "''")}'`)}, ${value}`),
    sql`, `,
  );
  return dialect === "sqlite"
    ? sql<string | null>`(select json_group_array(json_object(${pairs})) ${from})`
    : sql<string | null>`(select json_agg(json_build_object(${pairs}))::text ${from})`;
}

/**
 * The integer at `key` of the JSON object that `column` holds as text (null when absent), read
 * by the database: one field of a large document (a rollout's cursor names every node) without
 * sending the document over nor parsing it here.
 */
export function jsonIntegerAt(dialect: Dialect, column: SQLWrapper, key: string): SQL<number | null> {
  return dialect === "sqlite"
    ? sql<number | null>`json_extract(${column}, ${`$.${key}`})`
    : sql<number | null>`(${column}::json ->> ${key})::int`;
}

/**
 * The database's clock, `offsetMs` ahead, as the ISO-8601 text every time column holds: what
 * leases and heartbeats are measured by, so that replicas whose own clocks disagree still agree
 * on who holds what. SQLite's `strftime` keeps milliseconds; PostgreSQL's `now()` is the start
 * of the statement's transaction, which for the one-statement claims and renewals is the statement.
 */
export function databaseTime(dialect: Dialect, offsetMs: number | SQL = 0): SQL<string> {
  // An SQL offset: an integer expression of milliseconds (a column of the rows being written).
  if (typeof offsetMs !== "number")
    return dialect === "sqlite"
      ? sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', (${offsetMs} / 1000.0) || ' seconds')`
      : sql<string>`to_char((now() + ${offsetMs} * interval '1 millisecond') at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
  const seconds = (offsetMs / 1000).toFixed(3);
  return dialect === "sqlite"
    ? sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${sql.raw(`'${seconds} seconds'`)})`
    : sql<string>`to_char((now() + ${sql.raw(`interval '${seconds} seconds'`)}) at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/**
 * `column in (the strings of a JSON array)`: one parameter for any number of ids, so the
 * statement's text is the same for every list and is compiled once (an `inArray` of n ids is a
 * new statement for every n: compiled again on SQLite, parsed and described again on PostgreSQL).
 */
export function inJsonArray(dialect: Dialect, column: SQLWrapper, ids: readonly string[]): SQL {
  const json = JSON.stringify(ids);
  return dialect === "sqlite"
    ? sql`${column} in (select value from json_each(${json}))`
    : // An array built once (an InitPlan) and matched with `= any`, so the column's index finds
      // the rows: as `in (select …)` PostgreSQL joined the set to the whole table, a scan of
      // every node for each batch of reports (0.28 ms against 0.13 for 35 of 1,001 nodes, and
      // growing with the table).
      sql`${column} = any(array(select json_array_elements_text(cast(${json} as json))))`;
}

/**
 * The first column of each row of a statement the query builders cannot express (a CTE before
 * an INSERT … SELECT): SQLite's proxy hands rows back as arrays, PostgreSQL's driver as
 * objects. Counted in Store.statements like any other.
 */
export async function firstColumn(db: Tx, query: SQL): Promise<unknown[]> {
  if (dialectOf(db) === "sqlite") {
    const rows = (await (db as Db).all(query)) as unknown[][];
    return rows.map((row) => row[0]);
  }
  const rows = (await (db as unknown as { execute(q: SQL): Promise<Record<string, unknown>[]> }).execute(query)) ?? [];
  return rows.map((row) => Object.values(row)[0]);
}

/**
 * PostgreSQL: a query that takes a transaction advisory lock on `key`, for the first CTE of a
 * statement that draws sequence values (`with ordered as (…) insert … select … from ordered, …`):
 * such statements then commit one at a time, in the order of their ids, so a reader of "rows
 * after id N" never skips a row that commits later with a lower id. SQLite's one writer gives
 * that order already; there is no such lock there.
 */
export function commitOrderLock(key: number): SQL {
  return sql.raw(`select pg_advisory_xact_lock(${Math.trunc(key)})`);
}
