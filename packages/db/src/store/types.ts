import type { SqliteRemoteDatabase } from "drizzle-orm/sqlite-proxy";
import type * as schema from "../schema.ts";

export type Dialect = "sqlite" | "postgres";

/**
 * The asynchronous database every query is written against, on either dialect: drizzle's
 * query builders over the tables of schema.ts, awaited. It is typed as drizzle's asynchronous
 * SQLite database; on PostgreSQL the same calls go to drizzle's PostgreSQL database, which
 * builds its SQL from the same table objects (pg-schema.ts, built from them, is their DDL there). So queries
 * use only what both have: `await` a builder (never `.get()`/`.all()`/`.run()`, which only the
 * SQLite builders have; `firstRow()` takes a single row), `.returning()` for what a write
 * changed, `onConflictDoUpdate`/`onConflictDoNothing`, and no dialect-specific SQL functions.
 */
export type Db = SqliteRemoteDatabase<typeof schema>;

/**
 * What a function that reads or writes inside someone else's transaction takes: the open
 * transaction (`db.transaction(async (tx) => …)`) or the database itself. The one transaction
 * type of the project; the query builders are all such a function may use, so it cannot
 * commit, roll back or reach the connection.
 */
export type Tx = Pick<Db, "select" | "insert" | "update" | "delete">;

export interface Store {
  readonly dialect: Dialect;
  /** `db.transaction(async (tx) => …)` is atomic on both dialects (see StatementGate for SQLite). */
  readonly db: Db;
  /**
   * Statements run through `db` since the store opened (on SQLite BEGIN and COMMIT too), for
   * tests and benchmarks that count what an operation costs per node.
   */
  statements(): number;
  /** A cheap round trip to the database (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The first row of a result, for queries that expect at most one. */
export function firstRow<T>(rows: readonly T[]): T | undefined {
  return rows[0];
}

/** The row a write's `.returning()` gives back when it must have written one (an insert, an update by key that was just read). */
export function one<T>(rows: readonly T[]): T {
  const row = rows[0];
  if (row === undefined) throw new Error("the statement changed no row");
  return row;
}
