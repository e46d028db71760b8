import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { killAllFromPidFiles } from "../../../packages/agent/src/services/direct.ts";
import { REPO_ROOT } from "./processes.ts";

/**
 * What a test host needs to run node phases on a shared machine: a host root (every file the
 * phases write), a /proc and /sys as a healthy node has them (no swap, modules loaded, the
 * sysctls set: the host checks read these instead of the machine's), and the agent env that
 * points there. Several such hosts share one machine, each on its own primary IP.
 */

export const NODE_PACKAGE = join(REPO_ROOT, "test", "fixtures", "node-package");

export interface NodeHostDirs {
  root: string;
  hostRoot: string;
  procRoot: string;
  sysRoot: string;
}

const HEALTHY_SWAPS = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

export function nodeHostDirs(root: string): NodeHostDirs {
  const hostRoot = join(root, "host");
  const procRoot = join(root, "proc");
  const sysRoot = join(root, "sys");
  mkdirSync(hostRoot, { recursive: true });
  mkdirSync(procRoot, { recursive: true });
  mkdirSync(join(sysRoot, "module", "overlay"), { recursive: true });
  mkdirSync(join(sysRoot, "module", "br_netfilter"), { recursive: true });
  writeFileSync(join(procRoot, "swaps"), HEALTHY_SWAPS, { flag: "w" });
  writeFileSync(join(procRoot, "modules"), "overlay 151552 0 - Live 0x0\nbr_netfilter 32768 0 - Live 0x0\n");
  for (const [path, value] of [
    [["net", "ipv4", "ip_forward"], "1"],
    [["net", "bridge", "bridge-nf-call-iptables"], "1"],
    [["net", "bridge", "bridge-nf-call-ip6tables"], "1"],
  ] as const) {
    mkdirSync(join(procRoot, "sys", ...path.slice(0, -1)), { recursive: true });
    writeFileSync(join(procRoot, "sys", ...path), `${value}\n`);
  }
  return { root, hostRoot, procRoot, sysRoot };
}

/** Turns swap on (or off again) in the host's /proc: misc-checks fails while it is on. */
export function setSwap(dirs: NodeHostDirs, on: boolean): void {
  writeFileSync(
    join(dirs.procRoot, "swaps"),
    on ? `${HEALTHY_SWAPS}/dev/sdb1 partition 1048572 0 -2\n` : HEALTHY_SWAPS,
  );
}

/** The agent env of a node host: where it writes, what it runs, and a brisk reconcile loop. */
export function nodeHostEnv(dirs: NodeHostDirs, primaryIp: string, extra: Record<string, string> = {}) {
  return {
    KEELSON_PRIMARY_IP: primaryIp,
    KEELSON_HOST_ROOT: dirs.hostRoot,
    KEELSON_NODE_PACKAGE: NODE_PACKAGE,
    KEELSON_NODE_PROC_ROOT: dirs.procRoot,
    KEELSON_NODE_SYS_ROOT: dirs.sysRoot,
    KEELSON_SERVICE_MANAGER: "direct",
    KEELSON_NODE_CHECK_INTERVAL_MS: "1000",
    KEELSON_NODE_RETRY_INTERVAL_MS: "200",
    KEELSON_NODE_MAX_RETRY_INTERVAL_MS: "500",
    KEELSON_NODE_RETRY_BUDGET: "2",
    KEELSON_NODE_FAILED_RETRY_INTERVAL_MS: "1500",
    KEELSON_NODE_SERVICE_START_MS: "20000",
    KEELSON_NODE_WAIT_FOR_SERVICES_MS: "30000",
    ...extra,
  };
}

/** Pids of the services the phases started on this host that are still alive. */
export function liveServicePids(dirs: NodeHostDirs): Record<string, number> {
  const runDir = join(dirs.hostRoot, "run", "keelson");
  const out: Record<string, number> = {};
  if (!existsSync(runDir)) return out;
  for (const file of readdirSync(runDir).filter((f) => f.endsWith(".service.json"))) {
    try {
      const record = JSON.parse(readFileSync(join(runDir, file), "utf8")) as { pid?: number | null };
      if (record.pid && alive(record.pid)) out[file.replace(/\.service\.json$/, "")] = record.pid;
    } catch {
      // being rewritten
    }
  }
  return out;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills whatever the phases left running on the host (services outlive their agent by design). */
export function killNodeServices(dirs: NodeHostDirs): number[] {
  return killAllFromPidFiles(dirs.hostRoot);
}
