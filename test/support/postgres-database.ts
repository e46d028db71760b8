/**
 * Databases for test files on the run's PostgreSQL server (postgres-global-setup.ts). Apart from
 * postgres.ts because it imports vitest, which only works inside a test run.
 */
import { inject } from "vitest";
import { createDatabaseAt } from "./postgres.ts";

/** A new database of its own, named after a random id, cloned from the server's template; its URL. */
export function freshDatabaseUrl(): Promise<string> {
  return createDatabaseAt(inject("postgres").adminUrl);
}
