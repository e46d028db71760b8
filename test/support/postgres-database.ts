/**
 * Databases for test files on the run's PostgreSQL server (postgres-global-setup.ts). Apart from
 * postgres.ts because it imports vitest, which only works inside a test run.
 */
import { inject } from "vitest";
import { createDatabaseAt, dropDatabaseAt, MIGRATED_TEMPLATE } from "./postgres.ts";

/**
 * A new database of its own, named after a random id, cloned from the server's empty template
 * (or, with `migrated`, from the one the store's migrations already ran on); its URL.
 */
export function freshDatabaseUrl(options: { migrated?: boolean } = {}): Promise<string> {
  return createDatabaseAt(inject("postgres").adminUrl, undefined, options.migrated ? MIGRATED_TEMPLATE : undefined);
}

/** Drops a database freshDatabaseUrl made (a run makes hundreds: each costs some megabytes). */
export function dropDatabase(url: string): Promise<void> {
  return dropDatabaseAt(inject("postgres").adminUrl, new URL(url).pathname.slice(1));
}

/** Databases by a test's key (its data dir), so a server restarted on the same data dir finds its data again. */
const byKey = new Map<string, string>();

/** The database of `key`, made on first use from the migrated template. */
export async function databaseFor(key: string): Promise<string> {
  let url = byKey.get(key);
  if (!url) {
    url = await freshDatabaseUrl({ migrated: true });
    byKey.set(key, url);
  }
  return url;
}

/** Drops the database of `key`, if it has one. */
export async function dropDatabaseFor(key: string): Promise<void> {
  const url = byKey.get(key);
  if (!url) return;
  byKey.delete(key);
  await dropDatabase(url);
}
