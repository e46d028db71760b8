import { existsSync } from "node:fs";
import { urlHost } from "@keelson/protocol";
import { execa } from "execa";
import type { NodeConfig } from "../phases/config.ts";
import { findBinary } from "../phases/context.ts";
import { nodePaths } from "../phases/paths.ts";

/**
 * A master's view of its etcd cluster for the node report: how many members the member list
 * has (added-but-unstarted ones included) and how many of them answer `endpoint health`. The
 * control plane's rolling restart lets the next master go down only once a restarted master
 * says `healthy == members == masters`. Runs the node package's etcdctl with the etcd-client
 * certificate, like the etcd phases. Never throws: whatever goes wrong reads as "not healthy"
 * (a failed member list as 0 members), because the caller is a report, not a phase.
 */

export interface EtcdHealth {
  /** Members in the member list, unstarted ones included (0: the list could not be read). */
  members: number;
  /** Members whose client endpoint answered `endpoint health`. */
  healthy: number;
  /** When the check ran (ISO 8601). */
  checkedAt: string;
}

export interface EtcdHealthTarget {
  etcdctl: string;
  /** Where to ask: this member first, then the members it joined through. */
  endpoints: string[];
  tls: { caCert: string; cert: string; key: string };
  /** Bound on each etcdctl run (the process is killed after it). */
  timeoutMs: number;
}

/** Each check is two etcdctl runs; a dead member costs its dial timeout, not more. */
export const DEFAULT_ETCD_CHECK_TIMEOUT_MS = 4_000;

export function etcdHealthTarget(config: NodeConfig, timeoutMs = DEFAULT_ETCD_CHECK_TIMEOUT_MS): EtcdHealthTarget {
  const paths = nodePaths(config.hostRoot);
  const host = urlHost(config.primaryIp);
  const own = `https://${host}:${config.ports.etcdClient}`;
  let etcdctl: string;
  try {
    etcdctl = findBinary(config.nodePackage, "etcdctl");
  } catch {
    // Reported as a failed check when it runs, not as an exception while building a report.
    etcdctl = `${config.nodePackage}/bin/etcdctl`;
  }
  return {
    etcdctl,
    endpoints: [...new Set([own, ...config.etcdPeers])],
    tls: { caCert: paths.caCert, cert: paths.cert("etcd-client"), key: paths.key("etcd-client") },
    timeoutMs,
  };
}

/** The whole cluster is there: at least one member, and every member answers. */
export function etcdWhole(health: Pick<EtcdHealth, "members" | "healthy">): boolean {
  return health.members > 0 && health.healthy === health.members;
}

async function run(target: EtcdHealthTarget, args: string[], signal?: AbortSignal): Promise<string | undefined> {
  const dial = Math.max(1, Math.floor(target.timeoutMs / 2000));
  try {
    const out = await execa(
      target.etcdctl,
      [
        `--endpoints=${target.endpoints.join(",")}`,
        `--cacert=${target.tls.caCert}`,
        `--cert=${target.tls.cert}`,
        `--key=${target.tls.key}`,
        `--dial-timeout=${dial}s`,
        `--command-timeout=${dial}s`,
        ...args,
        "-w",
        "json",
      ],
      {
        env: { ETCDCTL_API: "3" },
        reject: false,
        timeout: target.timeoutMs,
        cancelSignal: signal,
        stdin: "ignore",
      },
    );
    // `endpoint health` exits 1 when a member is unhealthy but still prints every endpoint.
    return typeof out.stdout === "string" && out.stdout.trim() !== "" ? out.stdout : undefined;
  } catch {
    return undefined;
  }
}

/** `member list -w json`: `{members: [...]}`; undefined when unreadable. */
export function countMembers(json: string | undefined): number | undefined {
  if (json === undefined) return undefined;
  try {
    const parsed = JSON.parse(json) as { members?: unknown };
    return Array.isArray(parsed.members) ? parsed.members.length : undefined;
  } catch {
    return undefined;
  }
}

/** `endpoint health --cluster -w json`: `[{endpoint, health, ...}]`; distinct healthy endpoints. */
export function countHealthy(json: string | undefined): number {
  if (json === undefined) return 0;
  try {
    const parsed: unknown = JSON.parse(json);
    if (!Array.isArray(parsed)) return 0;
    const healthy = new Set<string>();
    for (const entry of parsed as { endpoint?: unknown; health?: unknown }[]) {
      if (entry && entry.health === true) healthy.add(String(entry.endpoint));
    }
    return healthy.size;
  } catch {
    return 0;
  }
}

export async function checkEtcdHealth(
  target: EtcdHealthTarget,
  signal?: AbortSignal,
  now: () => Date = () => new Date(),
): Promise<EtcdHealth> {
  // Without its client certificate (not issued yet, or cleaned) etcdctl can only fail: skip it.
  const { caCert, cert, key } = target.tls;
  if (![caCert, cert, key].every((file) => existsSync(file))) {
    return { members: 0, healthy: 0, checkedAt: now().toISOString() };
  }
  const members = countMembers(await run(target, ["member", "list"], signal));
  if (members === undefined) return { members: 0, healthy: 0, checkedAt: now().toISOString() };
  // --cluster asks every member at its advertised client URL; a member added but not started
  // advertises none, so it is counted in `members` but can never be healthy.
  const healthy = countHealthy(await run(target, ["endpoint", "health", "--cluster"], signal));
  return { members, healthy: Math.min(healthy, members), checkedAt: now().toISOString() };
}
