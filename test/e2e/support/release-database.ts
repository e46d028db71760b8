import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { freshDatabaseUrl } from "../../support/postgres-database.ts";

/**
 * Apart from releases.ts, which `pnpm bench upgrade` imports too: this needs the test run's
 * PostgreSQL server (postgres-database.ts imports vitest, which fails outside a test run).
 */

/**
 * A new database for an install with `--database-url` and `--database-password-file`: its URL
 * with the password (for a test's own reads), without it (for server.env), and the password file.
 */
export async function installDatabase(dir: string): Promise<{ url: string; bare: string; passwordFile: string }> {
  const url = new URL(await freshDatabaseUrl());
  const passwordFile = join(dir, "db-password");
  writeFileSync(passwordFile, `${decodeURIComponent(url.password)}\n`, { mode: 0o600 });
  const withPassword = url.toString();
  url.password = "";
  return { url: withPassword, bare: url.toString(), passwordFile };
}
