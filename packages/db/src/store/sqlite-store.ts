import type Database from "better-sqlite3";
import { drizzle as syncDrizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { drizzle } from "drizzle-orm/sqlite-proxy";
import { openSqliteConnection } from "../client.ts";
import * as schema from "../schema.ts";
import { StatementGate } from "./gate.ts";
import { markTransactions } from "./portable.ts";
import type { Db, Store } from "./types.ts";

/** Distinct statements kept compiled; the service issues a few hundred kinds at most. */
const STATEMENT_CACHE = 2_000;

type Method = "run" | "all" | "values" | "get";

/**
 * The embedded store: one better-sqlite3 connection behind drizzle's asynchronous SQLite
 * driver, so the same awaited queries run here and on PostgreSQL. Statements are compiled once
 * and kept by their SQL text; the gate keeps other statements out of an open transaction.
 */
export function openSqliteStore(file: string, migrationsFolder: string): Store {
  const sqlite = openSqliteConnection(file);
  // Migrations run before the store is shared, through drizzle's synchronous migrator.
  migrate(syncDrizzle(sqlite, { schema }), { migrationsFolder });

  const statements = new Map<string, Database.Statement>();
  const compile = (sql: string): Database.Statement => {
    let statement = statements.get(sql);
    if (!statement) {
      if (statements.size >= STATEMENT_CACHE) statements.clear();
      statement = sqlite.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
  const execute = (sql: string, params: unknown[], method: Method): { rows: unknown[] } => {
    // SQLite ends a transaction by itself on some errors (SQLITE_FULL at COMMIT, for one);
    // drizzle's ROLLBACK after it would then fail ("no transaction is active") and its error
    // would replace the one that says what happened.
    if (!sqlite.inTransaction && /^rollback\b/i.test(sql)) return { rows: [] };
    const statement = compile(sql);
    if (method === "run" || !statement.reader) {
      statement.run(...params);
      return { rows: [] };
    }
    const raw = statement.raw(true);
    // drizzle's proxy takes the row itself (or undefined) for `get`, a list for the others.
    return method === "get" ? { rows: raw.get(...params) as unknown[] } : { rows: raw.all(...params) };
  };

  const gate = new StatementGate();
  let ran = 0;
  const db: Db = drizzle(
    async (sql, params, method) => {
      ran++;
      return gate.statement(() => execute(sql, params, method));
    },
    { schema },
  );
  // A transaction holds the gate from BEGIN to COMMIT (see StatementGate). Nested calls on
  // `tx` are savepoints and already inside it.
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn, config) => gate.exclusive(() => transaction(fn, config))) as Db["transaction"];
  markTransactions(db, "sqlite");

  return {
    dialect: "sqlite",
    db,
    statements: () => ran,
    async ping() {
      await gate.statement(() => compile("select 1").raw(true).all());
    },
    async close() {
      await gate.exclusive(async () => {
        if (!sqlite.open) return;
        // Fold the WAL back into the main file so a clean stop leaves one self-contained file.
        // On a full disk the fold may fail; the WAL keeps every commit and the next open
        // replays it, so the connection is closed all the same.
        try {
          sqlite.pragma("wal_checkpoint(TRUNCATE)");
        } catch (err) {
          if ((err as { code?: unknown }).code !== "SQLITE_FULL") throw err;
        } finally {
          sqlite.close();
        }
      });
    },
  };
}
