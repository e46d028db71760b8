import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { type BetterSQLite3Database, drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import * as schema from "./schema.ts";
import { assertBinaryCanRun } from "./store/compat.ts";

export type Db = BetterSQLite3Database<typeof schema> & { $client: Database.Database };

/**
 * What a function that reads or writes inside someone else's transaction takes: the open
 * transaction (`db.transaction((tx) => …)`) or the database itself. The one transaction type of
 * the project; the query builders are all such a function may use, so it cannot commit, roll
 * back or reach the raw connection.
 */
export type Tx = Pick<Db, "select" | "insert" | "update" | "delete">;

const migrationsFolder = join(dirname(fileURLToPath(import.meta.url)), "..", "drizzle");

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

/**
 * Opens (and migrates) the SQLite database; with `binaryVersion`, refuses a schema that needs a
 * newer binary (SchemaTooNewError).
 */
export function openDatabase(file: string, binaryVersion?: string): Db {
  const sqlite = openSqliteConnection(file);
  const db = drizzle(sqlite, { schema }) as Db;
  migrate(db, { migrationsFolder });
  if (binaryVersion !== undefined) {
    const row = db.select().from(schema.keelsonSchema).get();
    try {
      assertBinaryCanRun(row?.minBinaryVersion, binaryVersion);
    } catch (err) {
      sqlite.close();
      throw err;
    }
  }
  return db;
}

/** A fresh, migrated in-memory database for tests. */
export function createTestDatabase(): Db {
  return openDatabase(":memory:");
}

export function closeDatabase(db: Db): void {
  if (!db.$client.open) return;
  // Fold the WAL back into the main file so a clean stop leaves one self-contained file.
  db.$client.pragma("wal_checkpoint(TRUNCATE)");
  db.$client.close();
}
