import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { keelsonSchema } from "../schema.ts";
import { assertBinaryCanRun } from "./compat.ts";
import { openPostgresStore, type PostgresOptions } from "./postgres-store.ts";

export { type Field, rowsOf } from "./batch-rows.ts";
export { StatementBatch, type StatementBatchOptions } from "./statement-batch.ts";

import { openSqliteStore } from "./sqlite-store.ts";
import { firstRow, type Store } from "./types.ts";

export {
  CLUSTER_CHANGES_FOLD_AFTER_MS,
  CLUSTER_CHANGES_RETENTION_MS,
  clusterChangeStamp,
  clusterChangeStampColumn,
  foldClusterChanges,
  pruneClusterChanges,
} from "./cluster-changes.ts";
export { assertBinaryCanRun, SchemaTooNewError } from "./compat.ts";
export { type CopyProgress, copySqliteToPostgres, TABLES_IN_ORDER, type TableCopy } from "./copy.ts";
export { checkDatabaseUrl, DATABASE_URL_RULE, type PostgresTarget, parseDatabaseUrl } from "./database-url.ts";
export {
  DataDirFullError,
  databaseUnavailable,
  isNoSpace,
  type StorageFull,
  storageFull,
  type UniqueViolation,
  uniqueViolation,
} from "./errors.ts";
export { StatementGate } from "./gate.ts";
export {
  commitOrderLock,
  databaseTime,
  dialectOf,
  firstColumn,
  inJsonArray,
  jsonArrayOf,
  jsonIntegerAt,
  lockedInIdOrder,
  lockIds,
  lockRows,
  type Prepared,
  perDatabase,
  prepare,
  writeInIdOrder,
} from "./portable.ts";
export {
  DatabaseUnavailableError,
  openPostgresStore,
  type PostgresOptions,
  type PostgresStore,
} from "./postgres-store.ts";
export { type Db, type Dialect, firstRow, one, type Store, type Tx } from "./types.ts";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where each dialect's drizzle-kit migrations are. */
export const MIGRATIONS = {
  sqlite: join(packageRoot, "drizzle"),
  postgres: join(packageRoot, "drizzle-pg"),
} as const;

export type StoreOptions = { binaryVersion: string } & (
  | { dialect: "sqlite"; file: string }
  | ({ dialect: "postgres" } & Omit<PostgresOptions, "migrationsFolder">)
);

/** Opens and migrates the store the settings name; refuses a schema that needs a newer binary. */
export async function openStore(options: StoreOptions): Promise<Store> {
  const store =
    options.dialect === "sqlite"
      ? openSqliteStore(options.file, MIGRATIONS.sqlite)
      : await openPostgresStore({ ...options, migrationsFolder: MIGRATIONS.postgres });
  try {
    assertBinaryCanRun(firstRow(await store.db.select().from(keelsonSchema))?.minBinaryVersion, options.binaryVersion);
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** A fresh, migrated in-memory SQLite store, for tests. */
export function createTestStore(): Store {
  return openSqliteStore(":memory:", MIGRATIONS.sqlite);
}
