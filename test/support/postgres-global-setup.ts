import type { TestProject } from "vitest/node";
import { SERVER_VERSION } from "../../packages/control-plane/src/version.ts";
import { openStore, parseDatabaseUrl } from "../../packages/db/src/store/index.ts";
import { createDatabaseAt, freezeAsTemplate, MIGRATED_TEMPLATE, startPostgres } from "./postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test run's PostgreSQL server (test/support/postgres.ts); databases on it: freshDatabaseUrl(). */
    postgres: { adminUrl: string };
    /**
     * Which store the control plane's test apps run on (helpers.ts createTestApp): the vitest
     * project sets it, so the same test files run once on each dialect.
     */
    storeDialect: "sqlite" | "postgres";
  }
}

/**
 * vitest globalSetup: one PostgreSQL server for the whole run, shared by every test file (a server
 * per file would cost a start each), stopped at the end of the run. It also prepares the migrated
 * template the control plane's test databases are cloned from.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  try {
    const url = await createDatabaseAt(server.adminUrl, MIGRATED_TEMPLATE);
    const store = await openStore({
      dialect: "postgres",
      target: parseDatabaseUrl(url),
      poolSize: 1,
      statementTimeoutMs: 60_000,
      connectTimeoutMs: 10_000,
      startTimeoutMs: 0,
      applicationName: "keelson-test-setup",
      binaryVersion: SERVER_VERSION,
    });
    await store.close();
    await freezeAsTemplate(server.adminUrl, MIGRATED_TEMPLATE);
  } catch (err) {
    await server.stop();
    throw err;
  }
  project.provide("postgres", { adminUrl: server.adminUrl });
  return () => server.stop();
}
