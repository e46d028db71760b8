import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openPostgresStore, type PostgresOptions } from "./postgres-store.ts";
import { openSqliteStore } from "./sqlite-store.ts";
import type { Store } from "./types.ts";

export { type CopyProgress, copySqliteToPostgres, TABLES_IN_ORDER, type TableCopy } from "./copy.ts";
export { checkDatabaseUrl, DATABASE_URL_RULE, type PostgresTarget, parseDatabaseUrl } from "./database-url.ts";
export { StatementGate } from "./gate.ts";
export {
  DatabaseUnavailableError,
  openPostgresStore,
  type PostgresOptions,
  type PostgresStore,
} from "./postgres-store.ts";
export { type AsyncDb, type AsyncTx, type Dialect, first, type Store } from "./types.ts";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where each dialect's drizzle-kit migrations are. */
export const MIGRATIONS = {
  sqlite: join(packageRoot, "drizzle"),
  postgres: join(packageRoot, "drizzle-pg"),
} as const;

export type StoreOptions =
  | { dialect: "sqlite"; file: string }
  | ({ dialect: "postgres" } & Omit<PostgresOptions, "migrationsFolder">);

/** Opens and migrates the store the settings name. */
export async function openStore(options: StoreOptions): Promise<Store> {
  if (options.dialect === "sqlite") return openSqliteStore(options.file, MIGRATIONS.sqlite);
  return openPostgresStore({ ...options, migrationsFolder: MIGRATIONS.postgres });
}
