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
  try {
    return configure(sqlite);
  } catch (err) {
    if (!noRoomForSharedMemory(err)) throw err;
    sqlite.close();
  }
  // A start on a full disk after a clean stop: WAL's shared-memory index (`-shm`, 32 KiB)
  // cannot be created. In exclusive locking mode SQLite keeps that index in the process's
  // memory instead, so the database opens and serves reads (writes then meet SQLITE_FULL, the
  // storage-full answer). The price, until the next start: no other process may open the
  // file meanwhile (an operator's sqlite3 shell waits for the lock).
  const exclusive = new Database(file);
  exclusive.pragma("locking_mode = EXCLUSIVE");
  return configure(exclusive);
}

function configure(sqlite: Database.Database): Database.Database {
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  return sqlite;
}

function noRoomForSharedMemory(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "SQLITE_IOERR_SHMSIZE" || code === "SQLITE_FULL";
}
