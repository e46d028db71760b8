import type { TestProject } from "vitest/node";
import { startPostgres } from "./postgres.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test run's PostgreSQL server (test/support/postgres.ts). */
    postgresAdminUrl: string;
  }
}

/** vitest globalSetup: one PostgreSQL server for the whole run, stopped at its end. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPostgres();
  project.provide("postgresAdminUrl", server.adminUrl);
  return () => server.stop();
}
