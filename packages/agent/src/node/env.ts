import type { ReconcileOptions, Timeouts } from "../phases/index.ts";
import type { NodeTuning } from "./node-config.ts";

/**
 * The node controller's knobs from the agent's environment. Production needs none of them;
 * tests and odd hosts do: KEELSON_NODE_PROC_ROOT / KEELSON_NODE_SYS_ROOT (where the host checks
 * read /proc and /sys), the reconcile loop's pace and retry budget, service timeouts, and
 * KEELSON_REGENERATE_CERTS=1 to issue fresh certificates at the next start.
 */

export class NodeEnvError extends Error {
  override name = "NodeEnvError";
}

const RECONCILE_ENV: Record<keyof ReconcileOptions, string> = {
  checkIntervalMs: "KEELSON_NODE_CHECK_INTERVAL_MS",
  retryIntervalMs: "KEELSON_NODE_RETRY_INTERVAL_MS",
  maxRetryIntervalMs: "KEELSON_NODE_MAX_RETRY_INTERVAL_MS",
  retryBudget: "KEELSON_NODE_RETRY_BUDGET",
  fullRestartEvery: "KEELSON_NODE_FULL_RESTART_EVERY",
  failedRetryIntervalMs: "KEELSON_NODE_FAILED_RETRY_INTERVAL_MS",
};

const TIMEOUT_ENV: Record<keyof Timeouts, string> = {
  serviceStartMs: "KEELSON_NODE_SERVICE_START_MS",
  waitForServicesMs: "KEELSON_NODE_WAIT_FOR_SERVICES_MS",
  commandMs: "KEELSON_NODE_COMMAND_MS",
  serviceStopMs: "KEELSON_NODE_SERVICE_STOP_MS",
};

export function readNodeTuning(env: NodeJS.ProcessEnv): NodeTuning {
  const get = (name: string) => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  const int = (name: string, min: number) => {
    const value = get(name);
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) {
      throw new NodeEnvError(`${name} must be an integer of at least ${min} (got "${value}")`);
    }
    return n;
  };
  const reconcile: Partial<ReconcileOptions> = {};
  for (const [key, name] of Object.entries(RECONCILE_ENV) as [keyof ReconcileOptions, string][]) {
    // A retry budget or full-restart period of 0 is meaningful (fail at once / never restart all).
    const value = int(name, key === "retryBudget" || key === "fullRestartEvery" ? 0 : 1);
    if (value !== undefined) reconcile[key] = value;
  }
  const timeouts: Partial<Timeouts> = {};
  for (const [key, name] of Object.entries(TIMEOUT_ENV) as [keyof Timeouts, string][]) {
    const value = int(name, 1);
    if (value !== undefined) timeouts[key] = value;
  }
  const procRoot = get("KEELSON_NODE_PROC_ROOT");
  const sysRoot = get("KEELSON_NODE_SYS_ROOT");
  const regenerate = get("KEELSON_REGENERATE_CERTS");
  if (regenerate !== undefined && !["0", "1", "true", "false"].includes(regenerate)) {
    throw new NodeEnvError(`KEELSON_REGENERATE_CERTS must be 1 or 0 (got "${regenerate}")`);
  }
  return {
    reconcile,
    timeouts,
    hostChecks: { ...(procRoot ? { procRoot } : {}), ...(sysRoot ? { sysRoot } : {}) },
    regenerateCerts: regenerate === "1" || regenerate === "true",
  };
}
