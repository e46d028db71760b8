import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { usageError } from "../errors.ts";

/**
 * The config file of `keelson upgrade --config FILE` (spec §4.9; README "Upgrading the control
 * plane"). The host-side parameters of the same file (`hostAgentRepo`, `dockerRepo`, `hosts`,
 * `nodeletPkg`) belong to configure-hosts, upgrade-hosts and upgrade-mgmt and are passed over here.
 */
export interface UpgradeConfig {
  /** The release to upgrade to; it must have been downloaded (`keelson download`). */
  version: string;
  /** Where the control plane is installed; default `/`. The `--root` flag wins. */
  root?: string;
  /** Where the backup goes; default <data dir>/backups/upgrade-<from>-to-<to>-<time>. */
  backupDir?: string;
  readyTimeoutSeconds: number;
  agentsTimeoutSeconds: number;
  /** How long the new release must stay ready (and not restart) before the upgrade counts as done. */
  trialWindowSeconds: number;
}

const HOST_SIDE = ["hostAgentRepo", "dockerRepo", "hosts", "nodeletPkg"];
const SECONDS = { readyTimeoutSeconds: 120, agentsTimeoutSeconds: 300, trialWindowSeconds: 30 } as const;

export function readUpgradeConfig(file: string): UpgradeConfig {
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw usageError(`--config ${file}: ${(err as Error).message}`);
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) throw usageError(`--config ${file}: must be a YAML map`);
  const d = doc as Record<string, unknown>;
  const known = ["version", "root", "backupDir", ...Object.keys(SECONDS), ...HOST_SIDE];
  for (const key of Object.keys(d))
    if (!known.includes(key)) throw usageError(`${file}: field ${key}: unknown (known: ${known.join(", ")})`);
  if (typeof d.version !== "string" || !/^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/.test(d.version))
    throw usageError(`${file}: field version: required, the release to upgrade to (e.g. 0.3.0)`);
  for (const key of ["root", "backupDir"])
    if (d[key] !== undefined && typeof d[key] !== "string") throw usageError(`${file}: field ${key}: must be a path`);
  const seconds = { ...SECONDS } as Record<keyof typeof SECONDS, number>;
  for (const key of Object.keys(SECONDS) as (keyof typeof SECONDS)[]) {
    const v = d[key];
    if (v === undefined) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 86_400)
      throw usageError(`${file}: field ${key}: must be a whole number of seconds from 0 to 86400`);
    seconds[key] = v;
  }
  return {
    version: d.version,
    ...(typeof d.root === "string" ? { root: d.root } : {}),
    ...(typeof d.backupDir === "string" ? { backupDir: d.backupDir } : {}),
    ...seconds,
  };
}
