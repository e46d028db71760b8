import { NodeEnvError } from "../node/env.ts";

/**
 * KEELSON_BACKUP_MINUTE_MS: a test knob that shortens the backup schedule's minute (so
 * `intervalInMins: 1` runs every few seconds in end-to-end tests). Unset in production.
 */
export function readBackupMinuteMs(env: NodeJS.ProcessEnv): number {
  const raw = env.KEELSON_BACKUP_MINUTE_MS?.trim();
  if (!raw) return 60_000;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 10) {
    throw new NodeEnvError(`KEELSON_BACKUP_MINUTE_MS must be an integer of at least 10 (ms), not ${raw}`);
  }
  return value;
}
