import { existsSync } from "node:fs";
import { join } from "node:path";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { definePhase } from "./common.ts";
import { tryBind } from "./net.ts";

/**
 * Miscellaneous scripts and checks: swap off, kernel modules loaded, sysctls set, and the
 * ports of the services still to start free on the primary IP. Every problem is listed with
 * the command that fixes it; nothing is changed behind the operator's back.
 */

export function swapProblem(procRoot: string): string | undefined {
  const text = readTextOrUndefined(join(procRoot, "swaps"));
  if (text === undefined) return `cannot read ${join(procRoot, "swaps")} to check swap`;
  const devices = text
    .split("\n")
    .slice(1)
    .map((l) => l.trim().split(/\s+/)[0])
    .filter((d): d is string => Boolean(d));
  if (devices.length === 0) return undefined;
  return `swap is on (${devices.join(", ")}); the kubelet refuses to run with swap: run "swapoff -a" and remove the swap entries from /etc/fstab`;
}

export function moduleProblems(procRoot: string, sysRoot: string, required: string[]): string[] {
  const loaded = new Set(
    (readTextOrUndefined(join(procRoot, "modules")) ?? "")
      .split("\n")
      .map((l) => l.split(" ")[0])
      .filter(Boolean),
  );
  // Built-in modules never show in /proc/modules but do have /sys/module/<name>.
  const missing = required.filter((m) => !loaded.has(m) && !existsSync(join(sysRoot, "module", m)));
  if (missing.length === 0) return [];
  return [
    `kernel module(s) ${missing.join(", ")} not loaded: run "modprobe ${missing.join(" && modprobe ")}" and list them in /etc/modules-load.d/k8s.conf`,
  ];
}

export function sysctlProblems(procRoot: string, required: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [name, want] of Object.entries(required)) {
    const file = join(procRoot, "sys", ...name.split("."));
    const actual = readTextOrUndefined(file)?.trim();
    if (actual === want) continue;
    const now = actual === undefined ? `missing (${file})` : `${actual}`;
    problems.push(
      `sysctl ${name} is ${now}, needs ${want}: run "sysctl -w ${name}=${want}" and persist it in /etc/sysctl.d/`,
    );
  }
  return problems;
}

/** Ports of the services this node runs after this phase, with the service that owns each. */
function requiredPorts(ctx: PhaseContext): { port: number; owner: string; what: string }[] {
  const p = ctx.config.ports;
  const ports = [
    { port: p.kubelet, owner: "kubelet", what: "kubelet API" },
    { port: p.kubeletHealthz, owner: "kubelet", what: "kubelet healthz" },
    { port: p.kubeProxyHealthz, owner: "kube-proxy", what: "kube-proxy healthz" },
    { port: p.kubeProxyMetrics, owner: "kube-proxy", what: "kube-proxy metrics" },
  ];
  if (ctx.config.role === "master") {
    ports.push(
      { port: p.apiServer, owner: "kube-apiserver", what: "Kubernetes API" },
      { port: p.corednsHealth, owner: "coredns", what: "coredns health" },
      { port: p.corednsReady, owner: "coredns", what: "coredns ready" },
    );
  }
  return ports;
}

export async function portProblems(ctx: PhaseContext): Promise<string[]> {
  const problems: string[] = [];
  const ours = new Map<string, boolean>();
  for (const { port, owner, what } of requiredPorts(ctx)) {
    if (!ours.has(owner)) ours.set(owner, (await ctx.services.status(owner)).pid !== null);
    // A port our own running service holds is in use as intended.
    if (ours.get(owner)) continue;
    const error = await tryBind(ctx.config.primaryIp, port);
    if (error === "EADDRINUSE") {
      problems.push(
        `port ${port} (${what}) on ${ctx.config.primaryIp} is taken by another process: find it with "ss -ltnp 'sport = :${port}'" and stop it`,
      );
    } else if (error) problems.push(`cannot bind ${ctx.config.primaryIp}:${port} (${what}): ${error}`);
  }
  return problems;
}

async function check(ctx: PhaseContext): Promise<void> {
  const { procRoot, sysRoot, requiredModules, requiredSysctls } = ctx.config.host;
  const problems = [
    swapProblem(procRoot),
    ...moduleProblems(procRoot, sysRoot, requiredModules),
    ...sysctlProblems(procRoot, requiredSysctls),
    ...(await portProblems(ctx)),
  ].filter((p): p is string => p !== undefined);
  if (problems.length > 0) throw new PhaseError(`host not ready: ${problems.join("; ")}`);
}

export const miscChecks = definePhase({
  id: "misc-checks",
  async start(ctx) {
    await check(ctx);
    return { message: "swap off, modules loaded, sysctls set, ports free" };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    await check(ctx);
    return undefined;
  },
});
