import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";

/**
 * A connection to the SQLite file as every Keelson connection is set up: WAL lets readers run
 * beside the single writer, the busy timeout absorbs short write contention, and foreign keys
 * are off by default in SQLite so they must be switched on per connection.
 */
export function openSqliteConnection(file: string): Database.Database {
  if (file !== ":memory:") mkdirSync(dirname(file), { recursive: true });
  const sqlite = new Database(file);
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  return sqlite;
}
