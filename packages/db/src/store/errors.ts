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
 * The database cannot answer now but may soon: PostgreSQL restarting, failing over or out of
 * reach, a connection cut mid-statement, a statement past its timeout; SQLite locked by another
 * process past the busy timeout, or its disk full. What the client should hear is 503 and
 * "try again", with the reason for the log.
 */
export function databaseUnavailable(err: unknown): string | undefined {
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
  if (/^SQLITE_(BUSY|FULL|IOERR|CANTOPEN)/.test(code)) {
    return `database: ${message} (${code})`;
  }
  return undefined;
}
