import type { SqliteRemoteDatabase } from "drizzle-orm/sqlite-proxy";
import type * as schema from "../schema.ts";

export type Dialect = "sqlite" | "postgres";

/**
 * The asynchronous database every query is written against, on either dialect: drizzle's
 * query builders over the tables of schema.ts, awaited. It is typed as drizzle's asynchronous
 * SQLite database; on PostgreSQL the same calls go to drizzle's PostgreSQL database, which
 * builds its SQL from the same table objects (pg-schema.ts is their DDL there). So queries
 * use only what both have: `await` a builder (never `.get()`/`.all()`/`.run()`, which only the
 * SQLite builders have; `first()` takes a single row), `.returning()` for what a write
 * changed, `onConflictDoUpdate`/`onConflictDoNothing`, and no dialect-specific SQL functions.
 */
export type AsyncDb = SqliteRemoteDatabase<typeof schema>;

/** What a function that runs inside someone else's transaction takes: the query builders only. */
export type AsyncTx = Pick<AsyncDb, "select" | "insert" | "update" | "delete">;

export interface Store {
  readonly dialect: Dialect;
  /** `db.transaction(async (tx) => …)` is atomic on both dialects (see StatementGate for SQLite). */
  readonly db: AsyncDb;
  /** A cheap round trip to the database (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The first row of a result, for queries that expect at most one. */
export function first<T>(rows: readonly T[]): T | undefined {
  return rows[0];
}
