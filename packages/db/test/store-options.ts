import { freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import { parseDatabaseUrl, type Store, type StoreOptions } from "../src/store/index.ts";

/** A test store's options: SQLite in memory, or a PostgreSQL database of its own (or `url`'s). */
export async function optionsFor(dialect: Store["dialect"], url?: string): Promise<StoreOptions> {
  if (dialect === "sqlite") return { dialect, file: ":memory:", binaryVersion: "0.1.0" };
  return {
    dialect,
    target: parseDatabaseUrl(url ?? (await freshDatabaseUrl())),
    poolSize: 4,
    statementTimeoutMs: 10_000,
    connectTimeoutMs: 5_000,
    startTimeoutMs: 0,
    applicationName: "keelson-test",
    binaryVersion: "0.1.0",
  };
}
