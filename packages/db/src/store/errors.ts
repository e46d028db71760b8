/**
 * What a failed statement means, whichever dialect raised it: the HTTP layer answers from these
 * (409 for a unique key taken by a concurrent request, 503 with Retry-After while the database
 * is away) instead of a 500, and never needs to know SQLite's or PostgreSQL's error codes.
 */

interface DriverError {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  table_name?: unknown;
  cause?: unknown;
}

/** drizzle wraps the driver's error in a DrizzleQueryError (whose message holds the query and its parameters). */
function driverError(err: unknown): DriverError | undefined {
  let e = err as DriverError | undefined;
  for (let depth = 0; depth < 4 && e && typeof e === "object"; depth++) {
    if (typeof e.code === "string") return e;
    e = e.cause as DriverError | undefined;
  }
  return undefined;
}

export interface UniqueViolation {
  table: string;
  columns: string[];
  /** The values that clashed, when the database says (PostgreSQL does), in `columns` order. */
  values?: string[];
}

/**
 * A unique key already taken: a concurrent request inserted the same name between this one's
 * check and its write (on PostgreSQL, where transactions run at once), or a key no check covers.
 */
export function uniqueViolation(err: unknown): UniqueViolation | undefined {
  const e = driverError(err);
  if (!e) return undefined;
  const message = typeof e.message === "string" ? e.message : "";
  if (e.code === "SQLITE_CONSTRAINT_UNIQUE" || e.code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
    // "UNIQUE constraint failed: clusters.project_id, clusters.name"
    const qualified = message.replace(/^.*constraint failed: /, "").split(", ");
    const table = qualified[0]?.split(".")[0] ?? "";
    return { table, columns: qualified.map((c) => c.split(".")[1] ?? c) };
  }
  if (e.code === "23505") {
    // detail: "Key (project_id, name)=(p1, racer) already exists."
    const match = /^Key \((.+)\)=\((.*)\) already exists/.exec(typeof e.detail === "string" ? e.detail : "");
    return {
      table: typeof e.table_name === "string" ? e.table_name : "",
      columns: match?.[1]?.split(", ") ?? [],
      ...(match?.[2] !== undefined ? { values: match[2].split(", ") } : {}),
    };
  }
  return undefined;
}

/**
 * A write to a file of the control plane's data dir that found its disk full (or the owner's
 * quota spent). Only code that writes the data dir's own files raises it (see the control
 * plane's data-dir-files.ts), so an ENOSPC from anywhere else (a child process, a temporary
 * file elsewhere) is never mistaken for the data dir's disk.
 */
export class DataDirFullError extends Error {
  override name = "DataDirFullError";
  readonly code: string;
  constructor(
    /** The file that could not be written. */
    readonly path: string,
    cause: NodeJS.ErrnoException,
  ) {
    super(`${path}: ${cause.message}`, { cause });
    this.code = cause.code ?? "ENOSPC";
  }
}

/** The errno codes of a write refused for want of space: the disk full, or the quota spent. */
export function isNoSpace(err: unknown): err is NodeJS.ErrnoException {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOSPC" || code === "EDQUOT";
}

export interface StorageFull {
  /** `data-dir`: SQLite or a file of the data dir; `database`: PostgreSQL's own disk. */
  where: "data-dir" | "database";
  /** For the log. */
  reason: string;
}

/**
 * The one recogniser of "the storage is full": SQLite's SQLITE_FULL (its file is in the data
 * dir), PostgreSQL's disk_full (SQLSTATE 53100) and a DataDirFullError. Writes then answer 507
 * while reads go on; the condition passes by itself once space returns, so it is also
 * something to wait out, like the database away (see databaseUnavailable).
 */
export function storageFull(err: unknown): StorageFull | undefined {
  for (let e = err, depth = 0; depth < 4 && e && typeof e === "object"; depth++) {
    if (e instanceof DataDirFullError) return { where: "data-dir", reason: e.message };
    e = (e as DriverError).cause;
  }
  const e = driverError(err);
  if (!e) return undefined;
  const message = typeof e.message === "string" ? e.message : String(e.code);
  if (e.code === "SQLITE_FULL") return { where: "data-dir", reason: `database: ${message} (SQLITE_FULL)` };
  if (e.code === "53100") return { where: "database", reason: `database: ${message} (53100)` };
  return undefined;
}

/**
 * The database cannot answer now but may soon: PostgreSQL restarting, failing over or out of
 * reach, a connection cut mid-statement, a statement past its timeout; SQLite locked by another
 * process past the busy timeout; the storage full (storageFull, which the HTTP layer answers
 * with 507 before it asks this). What the client should hear is 503 and "try again", with the
 * reason for the log; what a running operation does is wait and resume from its cursor.
 */
export function databaseUnavailable(err: unknown): string | undefined {
  const full = storageFull(err);
  if (full) return full.reason;
  const e = driverError(err);
  if (!e) return undefined;
  const code = e.code as string;
  const message = typeof e.message === "string" ? e.message : code;
  // postgres.js's own codes for a connection that failed or went away.
  if (
    [
      "CONNECTION_CLOSED",
      "CONNECTION_ENDED",
      "CONNECTION_DESTROYED",
      "CONNECT_TIMEOUT",
      "ECONNREFUSED",
      "ECONNRESET",
      "ETIMEDOUT",
      "EHOSTUNREACH",
      "ENETUNREACH",
      "EPIPE",
      "EMFILE",
      "ENFILE",
    ].includes(code)
  ) {
    return `database connection: ${message}`;
  }
  // SQLSTATE classes 08 (connection exception) and 57 (operator intervention: shutdown, query
  // canceled by statement_timeout), 53 (insufficient resources: too many connections, disk
  // full), 40001/40P01 (a serialization failure or deadlock: retrying is the remedy).
  if (/^(08|57|53)/.test(code) || code === "40001" || code === "40P01") return `database: ${message} (${code})`;
  if (/^SQLITE_(BUSY|IOERR|CANTOPEN)/.test(code)) {
    return `database: ${message} (${code})`;
  }
  return undefined;
}
