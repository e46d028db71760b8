import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { compareVersions } from "@keelson/protocol";

/**
 * PostgreSQL's own client programs (pg_dump, pg_restore, psql) for the control-plane backup.
 * A pg_dump older than the server's major version refuses it ("server version mismatch"), so
 * the newest installed client is used: Debian keeps one directory per major version under
 * /usr/lib/postgresql, and only one of them is on PATH.
 */

const run = promisify(execFile);
const DEBIAN_CLIENTS = "/usr/lib/postgresql";

export class PgToolMissing extends Error {
  override name = "PgToolMissing";
}

/** The newest installed copy of a PostgreSQL client program. */
export function pgTool(name: "pg_dump" | "pg_restore" | "psql", path: string): string {
  const versions = existsSync(DEBIAN_CLIENTS)
    ? readdirSync(DEBIAN_CLIENTS)
        .filter((v) => existsSync(join(DEBIAN_CLIENTS, v, "bin", name)))
        .sort((a, b) => compareVersions(b, a))
    : [];
  if (versions[0]) return join(DEBIAN_CLIENTS, versions[0], "bin", name);
  const onPath = path
    .split(":")
    .map((dir) => join(dir, name))
    .find((file) => existsSync(file));
  if (onPath) return onPath;
  throw new PgToolMissing(
    `${name} is not installed: install PostgreSQL's client programs (Debian: postgresql-client) at least as new as the database server`,
  );
}

/**
 * How a client program reaches the database: libpq reads the URL itself (sslmode, sslrootcert,
 * sslcert, sslkey work as they do for the server), but the password goes through the
 * environment, never the command line, where `ps` would show it.
 */
export interface PgConnection {
  /** The URL without its password. */
  url: string;
  env: Record<string, string>;
}

export function pgConnection(databaseUrl: string, password: string | undefined, path: string): PgConnection {
  const url = new URL(databaseUrl);
  const fromUrl = url.password ? decodeURIComponent(url.password) : undefined;
  url.password = "";
  const secret = password ?? fromUrl;
  return {
    url: url.toString(),
    env: { PATH: path, PGAPPNAME: "keelson-backup", ...(secret !== undefined ? { PGPASSWORD: secret } : {}) },
  };
}

/** Runs a client program; rejects with its own words (stderr), which name what went wrong. */
export async function runPgTool(
  file: string,
  args: string[],
  connection: PgConnection,
  options: { input?: string; maxBuffer?: number } = {},
): Promise<string> {
  try {
    const child = run(file, args, { env: connection.env, maxBuffer: options.maxBuffer ?? 64 * 1024 * 1024 });
    if (options.input !== undefined) child.child.stdin?.end(options.input);
    return (await child).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${file.split("/").at(-1)}: ${(e.stderr || e.message).trim()}`);
  }
}
