import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

/**
 * Backup file names: `etcd-interval-<UTC timestamp>.db` and `etcd-daily-<UTC date>.db`. Both
 * sort by name in time order, so retention and "when was the last one" need no metadata.
 */

export type BackupKind = "interval" | "daily";

const PATTERNS: Record<BackupKind, RegExp> = {
  interval: /^etcd-interval-(\d{8}T\d{6}Z)\.db$/,
  daily: /^etcd-daily-(\d{4}-\d{2}-\d{2})\.db$/,
};

/** 20261122T123000Z: ISO 8601 basic format, safe in file names. */
function compactTimestamp(at: Date): string {
  return at
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}Z$/, "Z");
}

export function backupFileName(kind: BackupKind, at: Date): string {
  return kind === "interval"
    ? `etcd-interval-${compactTimestamp(at)}.db`
    : `etcd-daily-${at.toISOString().slice(0, 10)}.db`;
}

/** The backups of one kind in `dir`, oldest first. */
export function listBackups(dir: string, kind: BackupKind): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => PATTERNS[kind].test(n)).sort();
}

/** When the newest backup of `kind` was taken (from its name), if there is one. */
export function newestBackupTime(dir: string, kind: BackupKind): number | undefined {
  const newest = listBackups(dir, kind).at(-1);
  const stamp = newest ? PATTERNS[kind].exec(newest)?.[1] : undefined;
  if (!stamp) return undefined;
  const iso =
    kind === "interval"
      ? stamp.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, "$1-$2-$3T$4:$5:$6Z")
      : `${stamp}T00:00:00Z`;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Deletes the oldest backups of `kind` beyond `keep`; returns the names removed. */
export function pruneBackups(dir: string, kind: BackupKind, keep: number): string[] {
  const all = listBackups(dir, kind);
  const doomed = all.slice(0, Math.max(0, all.length - keep));
  for (const name of doomed) rmSync(join(dir, name), { force: true });
  return doomed;
}
