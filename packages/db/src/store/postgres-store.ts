import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import type { PostgresTarget } from "./database-url.ts";
import { markTransactions } from "./portable.ts";
import type { Db, Store } from "./types.ts";

export interface PostgresOptions {
  target: PostgresTarget;
  /** Instead of a password in the URL (read from a file by the caller). */
  password?: string;
  poolSize: number;
  statementTimeoutMs: number;
  /** One connection attempt. */
  connectTimeoutMs: number;
  /** How long an unreachable or refusing database is retried at start before giving up. */
  startTimeoutMs: number;
  applicationName: string;
  migrationsFolder: string;
  /** Told about each failed attempt before the next (for the log). */
  onRetry?: (failure: DatabaseUnavailableError, delayMs: number) => void;
}

/** The database could not be reached or refused us: names where and the server's answer, never the password. */
export class DatabaseUnavailableError extends Error {
  override name = "DatabaseUnavailableError";
  constructor(
    readonly target: string,
    readonly answer: string,
    readonly code: string | undefined,
  ) {
    super(`PostgreSQL at ${target}: ${answer}${code ? ` (${code})` : ""}`);
  }
}

function unavailable(target: PostgresTarget, err: unknown, password: string | undefined): DatabaseUnavailableError {
  const e = err as { code?: unknown; message?: unknown };
  let answer = typeof e.message === "string" && e.message !== "" ? e.message : String(err);
  // Belt and braces: no answer may carry the password, whatever produced it.
  const secret = password ?? decodeURIComponent(new URL(target.url).password);
  if (secret) answer = answer.split(secret).join("(hidden)");
  return new DatabaseUnavailableError(target.display, answer, typeof e.code === "string" ? e.code : undefined);
}

/**
 * Two servers starting at once must migrate once: the first takes this session lock, the
 * second waits and then finds nothing left to do. (A transaction-pooling proxy cannot hold a
 * session lock: the README says to point Keelson at the database or a session-pooling proxy.)
 */
const MIGRATION_LOCK = 0x6b65656c; // "keel"

/**
 * The production store: a pool of postgres.js connections (chosen over `pg` because it follows
 * `target_session_attrs=read-write` across a failover, has TCP keepalive and reserved
 * connections built in) behind drizzle's PostgreSQL driver. Queries are the same awaited
 * drizzle calls as on SQLite (see Db).
 */
/** The PostgreSQL store, with its pool for the few jobs that speak SQL directly (the copy from SQLite). */
export interface PostgresStore extends Store {
  readonly client: postgres.Sql;
}

/**
 * The database's own verdict on a statement (PostgreSQL answered with a SQLSTATE outside the
 * classes that mean "not there for us yet": 08 connection, 28 authorization, 3D no such database,
 * 40 rolled back, 53 resources, 57 shutting down or starting up). A migration's bad statement is
 * one: retrying it until the start timeout would only hide what failed.
 */
function refusedStatement(err: unknown): boolean {
  for (let e = err as { name?: unknown; code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof postgres.PostgresError) return !/^(08|28|3D|40|53|57)/.test(e.code);
  }
  return false;
}

export async function openPostgresStore(options: PostgresOptions): Promise<PostgresStore> {
  const deadline = Date.now() + options.startTimeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect(options);
    } catch (err) {
      if (refusedStatement(err)) throw err;
      const failure = unavailable(options.target, err, options.password);
      const delayMs = Math.min(5_000, 250 * 2 ** (attempt - 1));
      if (Date.now() + delayMs > deadline) throw failure;
      options.onRetry?.(failure, delayMs);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}

/**
 * The wait before a pooled connection connects again after a failure, in seconds: 50 ms doubling
 * to 1 s, with jitter. postgres.js's own grows with every failed connect of the whole pool (the
 * count is shared) to 10–20 s, so a busy server that lived through a PostgreSQL restart of a few
 * seconds waited up to 17 s more for connections once the database was back (the operations'
 * leases ran out meanwhile). Connecting to a database that is away costs a refused TCP connect.
 */
function reconnectDelaySeconds(failures: number): number {
  return Math.min(1, 0.05 * 2 ** failures) * (0.5 + Math.random() / 2);
}

function client(options: PostgresOptions, max: number): postgres.Sql {
  return postgres(options.target.url, {
    ssl: options.target.ssl,
    max,
    ...(options.password !== undefined ? { password: options.password } : {}),
    connect_timeout: Math.ceil(options.connectTimeoutMs / 1000),
    keep_alive: 30,
    backoff: reconnectDelaySeconds,
    target_session_attrs: "read-write",
    connection: {
      application_name: options.applicationName,
      statement_timeout: options.statementTimeoutMs,
    },
    // Server notices (e.g. "relation already exists, skipping") are not the service's to print.
    onnotice: () => {},
  });
}

/**
 * Runs the migrations on a client of its own with a single connection: the advisory lock is
 * that session's, so lock, migrations and unlock must share it (and a pool of one connection
 * must not wait on itself for a second).
 */
async function migrateOnce(options: PostgresOptions): Promise<void> {
  const session = client(options, 1);
  try {
    await session`select pg_advisory_lock(${MIGRATION_LOCK})`;
    try {
      await migrate(drizzle(session), { migrationsFolder: options.migrationsFolder });
    } finally {
      await session`select pg_advisory_unlock(${MIGRATION_LOCK})`;
    }
  } finally {
    await session.end({ timeout: 1 });
  }
}

async function connect(options: PostgresOptions): Promise<PostgresStore> {
  await migrateOnce(options);
  const pool = client(options, options.poolSize);
  let statements = 0;
  // Typed as the SQLite driver's database on purpose: see Db.
  const db = drizzle(pool, { logger: { logQuery: () => void statements++ } }) as unknown as Db;
  markTransactions(db, "postgres");
  return {
    dialect: "postgres",
    db,
    statements: () => statements,
    client: pool,
    async ping() {
      await pool`select 1`;
    },
    async close() {
      await pool.end({ timeout: 5 });
    },
  };
}
