import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, isAbsolute, join, normalize, resolve, sep } from "node:path";
import { openSqliteConnection } from "@keelson/db";
import { readPassword } from "../database.ts";
import type { ServerSettings } from "../settings.ts";
import { SERVER_VERSION } from "../version.ts";
import { pgConnection, pgTool, runPgTool } from "./pg-tools.ts";

/**
 * The control-plane backup that an upgrade is taken behind and a rollback restores: the
 * database by its dialect's own consistent copy (SQLite's online backup API, which a running
 * server does not disturb; `pg_dump` in custom format) and, always, the data dir's secrets,
 * without which the database's sealed credentials and certificate keys are unreadable. A
 * backup is a directory (0700) with a manifest naming every file's size and SHA-256; it is
 * written under a `.partial` name and renamed when complete, so a half-written backup never
 * looks like one.
 */

/** Data-dir files a backup always carries (secret.key seals credentials and CA keys). */
const SECRET_FILES = ["secret.key", "webcli.key", "admin-token"] as const;
/** The server's TLS CA and certificate (tls/, with a staged next CA): agents pin that CA. */
const SECRET_DIRS = ["tls"] as const;

/** Every file under `dir`, as paths relative to `root`. */
function filesUnder(root: string, dir: string): string[] {
  const at = join(root, dir);
  if (!existsSync(at) || !statSync(at).isDirectory()) return [];
  return readdirSync(at, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(root, join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : [],
  );
}

/** The data dir's secrets that exist, relative to it (admin-token is absent when KEELSON_ADMIN_TOKEN gives it). */
function secretFiles(dataDir: string): string[] {
  return [
    ...SECRET_FILES.filter((name) => existsSync(join(dataDir, name))),
    ...SECRET_DIRS.flatMap((dir) => filesUnder(dataDir, dir)),
  ];
}

/** A manifest's file name that stays inside the backup: relative, no `..`. */
function safeName(name: string): boolean {
  return typeof name === "string" && name !== "" && !isAbsolute(name) && !normalize(name).split(sep).includes("..");
}
const SQLITE_FILE = "keelson.sqlite";
const PG_DUMP_FILE = "keelson.pgdump";
const MANIFEST = "manifest.json";
/** Bumped when a backup's layout changes; restore refuses a format it does not know. */
const FORMAT = 1;

export interface BackupManifest {
  format: number;
  createdAt: string;
  serverVersion: string;
  dialect: "sqlite" | "postgres";
  /** The oldest keelson-server that can run on the database inside (keelson_schema). */
  requiresServer: string | null;
  files: { name: string; bytes: number; sha256: string }[];
}

export class BackupRefused extends Error {
  override name = "BackupRefused";
}

function sha256(file: string): string {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

function stamp(now: Date): string {
  return now
    .toISOString()
    .replaceAll(":", "")
    .replace(/\.\d+Z$/, "Z");
}

/** Where a backup goes when the operator names no directory: the data dir's `backups/`. */
export function defaultBackupDir(settings: ServerSettings, now = new Date()): string {
  return join(settings.dataDir, "backups", `keelson-${stamp(now)}-${SERVER_VERSION}`);
}

function password(settings: ServerSettings): string | undefined {
  return settings.databasePasswordFile ? readPassword(settings.databasePasswordFile) : undefined;
}

/** The keelson_schema row's oldest server, read from the copy (never from a live database mid-change). */
function sqliteRequires(file: string): string | null {
  const db = openSqliteConnection(file);
  try {
    const row = db.prepare("select min_binary_version as v from keelson_schema limit 1").get() as
      | { v: string }
      | undefined;
    return row?.v ?? null;
  } catch {
    return null;
  } finally {
    db.close();
  }
}

async function postgresRequires(settings: ServerSettings): Promise<string | null> {
  const connection = pgConnection(settings.databaseUrl as string, password(settings), settings.path);
  const out = await runPgTool(
    pgTool("psql", settings.path),
    [
      "-X",
      "-A",
      "-t",
      "-v",
      "ON_ERROR_STOP=1",
      "-d",
      connection.url,
      "-c",
      "select min_binary_version from keelson_schema limit 1",
    ],
    connection,
  ).catch(() => "");
  return out.trim() || null;
}

/** Writes a backup of the control plane the settings name into `dir`; returns its manifest. */
export async function backupControlPlane(settings: ServerSettings, dir: string): Promise<BackupManifest> {
  const target = resolve(dir);
  if (existsSync(target) && readdirSync(target).length > 0) {
    throw new BackupRefused(`${target} exists and is not empty: name a new directory`);
  }
  const partial = `${target}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true, mode: 0o700 });
  try {
    let dialect: BackupManifest["dialect"];
    let requiresServer: string | null;
    if (settings.databaseUrl) {
      dialect = "postgres";
      const connection = pgConnection(settings.databaseUrl, password(settings), settings.path);
      // Custom format: compressed, and pg_restore can restore it in one transaction.
      await runPgTool(
        pgTool("pg_dump", settings.path),
        ["--format=custom", `--file=${join(partial, PG_DUMP_FILE)}`, "--no-password", connection.url],
        connection,
      );
      requiresServer = await postgresRequires(settings);
    } else {
      dialect = "sqlite";
      const source = join(settings.dataDir, SQLITE_FILE);
      if (!existsSync(source))
        throw new BackupRefused(`no database at ${source} (KEELSON_DATA_DIR names the data dir)`);
      const db = openSqliteConnection(source);
      try {
        await db.backup(join(partial, SQLITE_FILE));
      } finally {
        db.close();
      }
      requiresServer = sqliteRequires(join(partial, SQLITE_FILE));
    }
    for (const name of secretFiles(settings.dataDir)) {
      mkdirSync(dirname(join(partial, name)), { recursive: true, mode: 0o700 });
      copyFileSync(join(settings.dataDir, name), join(partial, name));
    }
    // The database holds password hashes and sealed keys: as private as the secrets.
    const names = filesUnder(partial, ".")
      .map((name) => normalize(name))
      .sort();
    for (const name of names) chmodSync(join(partial, name), 0o600);
    const files = names.map((name) => ({
      name,
      bytes: statSync(join(partial, name)).size,
      sha256: sha256(join(partial, name)),
    }));
    const manifest: BackupManifest = {
      format: FORMAT,
      createdAt: new Date().toISOString(),
      serverVersion: SERVER_VERSION,
      dialect,
      requiresServer,
      files,
    };
    writeFileSync(join(partial, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
    rmSync(target, { recursive: true, force: true });
    renameSync(partial, target);
    return manifest;
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
}

/** Reads a backup's manifest and checks every file it names against its size and SHA-256. */
export function verifiedManifest(dir: string): BackupManifest {
  const file = join(dir, MANIFEST);
  if (!existsSync(file)) throw new BackupRefused(`${dir} is not a keelson backup (no ${MANIFEST})`);
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(readFileSync(file, "utf8")) as BackupManifest;
  } catch {
    throw new BackupRefused(`${file} is not valid JSON`);
  }
  if (manifest.format !== FORMAT) {
    throw new BackupRefused(
      `${file}: backup format ${String(manifest.format)} is not one this server reads (${FORMAT})`,
    );
  }
  for (const entry of manifest.files) {
    if (!safeName(entry.name))
      throw new BackupRefused(`${file} names a file outside the backup: ${String(entry.name)}`);
    const path = join(dir, entry.name);
    if (!existsSync(path)) throw new BackupRefused(`${path} is missing from the backup`);
    if (statSync(path).size !== entry.bytes || sha256(path) !== entry.sha256) {
      throw new BackupRefused(`${path} does not match the backup's manifest (changed or damaged since it was taken)`);
    }
  }
  return manifest;
}

export { PG_DUMP_FILE, SQLITE_FILE };
