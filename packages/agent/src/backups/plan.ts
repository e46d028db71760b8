import { isAbsolute, join, normalize } from "node:path";

/**
 * What the cluster spec (§2.1) asks of a master's etcd backups, read from the settings the
 * control plane sends (`node.join` / `node.settings`). The control plane validated the fields
 * (domain/clusters/spec/rules.ts); this only turns them into a plan and refuses what cannot run.
 */

/** Where backups go when the spec names no localPath (under the host root). */
export const DEFAULT_BACKUP_DIR = "/var/lib/keelson/etcd-backups";

export interface BackupPlan {
  /** Absolute directory on this host (host root + localPath). */
  dir: string;
  /** Interval backups: every this many ms, keeping `keep` of them. */
  interval?: { everyMs: number; keep: number };
  /** Daily backups at hh:mm UTC, keeping `keep` of them. */
  daily?: { hour: number; minute: number; keep: number };
}

export type PlanResult = { kind: "off" } | { kind: "plan"; plan: BackupPlan } | { kind: "invalid"; error: string };

const DAILY_TIME = /^([01]\d|2[0-3]):([0-5]\d)$/;

function positiveInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}

/**
 * `minuteMs` is one minute (60 000); tests shorten it (KEELSON_BACKUP_MINUTE_MS) so an
 * `intervalInMins: 1` schedule runs in seconds. dailyBackupTime is wall-clock UTC and is not
 * affected.
 */
export function backupPlanOf(settings: Record<string, unknown>, hostRoot: string, minuteMs = 60_000): PlanResult {
  // Stored as a boolean; 1 is taken too, as the API's flags read.
  const enabled = settings.isEtcdBackupEnabled;
  if (enabled !== true && enabled !== 1) return { kind: "off" };
  const storage = settings.storageType ?? "local";
  if (storage !== "local")
    return { kind: "invalid", error: `storageType ${String(storage)} is not supported (local only)` };
  const localPath =
    typeof settings.localPath === "string" && settings.localPath !== "" ? settings.localPath : DEFAULT_BACKUP_DIR;
  if (!isAbsolute(localPath)) return { kind: "invalid", error: `localPath ${localPath} is not an absolute path` };
  const plan: BackupPlan = { dir: join(hostRoot, normalize(localPath)) };
  const mins = positiveInt(settings.intervalInMins);
  const hours = positiveInt(settings.intervalInHours);
  const everyMs = mins !== undefined ? mins * minuteMs : hours !== undefined ? hours * 60 * minuteMs : undefined;
  if (everyMs !== undefined) {
    const keep = positiveInt(settings.maxIntervalBackupCount);
    if (keep === undefined) return { kind: "invalid", error: "an interval backup needs maxIntervalBackupCount" };
    plan.interval = { everyMs, keep };
  }
  if (typeof settings.dailyBackupTime === "string" && settings.dailyBackupTime !== "") {
    const match = DAILY_TIME.exec(settings.dailyBackupTime);
    if (!match) return { kind: "invalid", error: `dailyBackupTime ${settings.dailyBackupTime} is not HH:MM` };
    const keep = positiveInt(settings.maxTimestampBackupCount);
    if (keep === undefined) return { kind: "invalid", error: "a daily backup needs maxTimestampBackupCount" };
    plan.daily = { hour: Number(match[1]), minute: Number(match[2]), keep };
  }
  if (!plan.interval && !plan.daily) {
    return { kind: "invalid", error: "backups are enabled but neither an interval nor dailyBackupTime is set" };
  }
  return { kind: "plan", plan };
}
