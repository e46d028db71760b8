import type { TestProject } from "vitest/node";
import { startPostgres } from "./postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test run's PostgreSQL server (test/support/postgres.ts); databases on it: freshDatabaseUrl(). */
    postgres: { adminUrl: string };
  }
}

/**
 * vitest globalSetup: one PostgreSQL server for the whole run, shared by every test file (a server
 * per file would cost a start each), stopped at the end of the run.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide("postgres", { adminUrl: server.adminUrl });
  return () => server.stop();
}
