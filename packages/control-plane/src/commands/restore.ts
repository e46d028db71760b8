import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { assertBinaryCanRun, SchemaTooNewError } from "@keelson/db";
import { readPassword } from "../database.ts";
import type { ServerSettings } from "../settings.ts";
import { SERVER_VERSION } from "../version.ts";
import { type BackupManifest, BackupRefused, PG_DUMP_FILE, SQLITE_FILE, verifiedManifest } from "./backup.ts";
import { pgConnection, pgTool, runPgTool } from "./pg-tools.ts";

/**
 * Puts a backup (backup.ts) back: the database whole, in one step, and the secrets it was
 * sealed with. What it replaces is kept beside it (`*.replaced-<time>`), never deleted. Refused
 * while a keelson-server runs on the database: a running server would keep writing into what
 * is being replaced.
 */

function aside(file: string, suffix: string): void {
  if (existsSync(file)) renameSync(file, `${file}.replaced-${suffix}`);
}

/** Copies through a temporary name, so the data dir never holds half a file. */
function place(from: string, to: string, mode: number): void {
  copyFileSync(from, `${to}.restoring`);
  chmodSync(`${to}.restoring`, mode);
  renameSync(`${to}.restoring`, to);
}

function restoreSqlite(settings: ServerSettings, dir: string, suffix: string): void {
  const file = join(settings.dataDir, SQLITE_FILE);
  const wal = `${file}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) {
    throw new BackupRefused(
      `${wal} is not empty: keelson-server is running on this data dir or did not stop cleanly; stop it (or start and stop it once) and run this again`,
    );
  }
  aside(file, suffix);
  aside(wal, suffix);
  aside(`${file}-shm`, suffix);
  place(join(dir, SQLITE_FILE), file, 0o600);
}

/** Sessions of keelson-server (its application_name) on the database, other than this one. */
const RUNNING_SERVERS =
  "select count(*) from pg_stat_activity where datname = current_database() and application_name like 'keelson-server %' and pid <> pg_backend_pid()";

async function restorePostgres(settings: ServerSettings, dir: string): Promise<void> {
  const connection = pgConnection(
    settings.databaseUrl as string,
    settings.databasePasswordFile ? readPassword(settings.databasePasswordFile) : undefined,
    settings.path,
  );
  const psql = pgTool("psql", settings.path);
  const running = Number(
    (await runPgTool(psql, ["-X", "-A", "-t", "-d", connection.url, "-c", RUNNING_SERVERS], connection)).trim(),
  );
  if (running > 0) {
    throw new BackupRefused(
      `${running} keelson-server connection(s) are open on this database: stop every keelson-server that uses it, then run this again`,
    );
  }
  // The dump as SQL, run by psql in ONE transaction after the schemas it fills are emptied:
  // tables a newer release added (the upgrade being rolled back) go too, and a failure
  // anywhere leaves the database as it was.
  const script = await runPgTool(
    pgTool("pg_restore", settings.path),
    ["--no-owner", "--no-privileges", "--file=-", join(dir, PG_DUMP_FILE)],
    connection,
    { maxBuffer: 1024 * 1024 * 1024 },
  );
  const reset =
    "drop schema if exists drizzle cascade;\ndrop schema if exists public cascade;\ncreate schema public;\n";
  await runPgTool(
    psql,
    ["-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-d", connection.url, "-f", "-"],
    connection,
    {
      input: reset + script,
    },
  );
}

/** Restores `dir` into the control plane the settings name; returns the backup's manifest. */
export async function restoreControlPlane(
  settings: ServerSettings,
  dir: string,
  now = new Date(),
): Promise<BackupManifest> {
  const manifest = verifiedManifest(dir);
  const want = settings.databaseUrl ? "postgres" : "sqlite";
  if (manifest.dialect !== want) {
    throw new BackupRefused(
      `the backup holds a ${manifest.dialect} database and this server is set up for ${want}` +
        (want === "postgres" ? " (restore it on SQLite, then run keelson-server migrate-to-postgres)" : ""),
    );
  }
  try {
    assertBinaryCanRun(manifest.requiresServer ?? undefined, SERVER_VERSION);
  } catch (err) {
    if (err instanceof SchemaTooNewError) {
      throw new BackupRefused(
        `the backup's database needs keelson-server ${err.required} or newer, and this one is ${err.binary}: restore it with that release`,
      );
    }
    throw err;
  }
  mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
  const suffix = now
    .toISOString()
    .replaceAll(":", "")
    .replace(/\.\d+Z$/, "Z");
  if (want === "postgres") await restorePostgres(settings, dir);
  else restoreSqlite(settings, dir, suffix);
  for (const { name } of manifest.files) {
    if (name === SQLITE_FILE || name === PG_DUMP_FILE) continue;
    const to = join(settings.dataDir, name);
    mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
    aside(to, suffix);
    place(join(dir, name), to, 0o600);
  }
  return manifest;
}
