import { join } from "node:path";
import { readTextOrUndefined } from "../../services/atomic-file.ts";
import { listenersOn, socketHolders } from "../../services/port-holder.ts";
import type { HostChecks } from "../config.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { definePhase, expectFiles, writeFiles } from "./common.ts";
import { applyLive, hostSettingFiles, modulePresent, sysctlFile } from "./host-settings.ts";
import { tryBind } from "./net.ts";

/**
 * Miscellaneous scripts and checks. It applies what Kubernetes needs of the kernel itself (the
 * modules in /etc/modules-load.d, the sysctls in /etc/sysctl.d, and on the real host the
 * running kernel too: host-settings.ts), and only then checks: swap off, modules present
 * (loaded or built in), sysctls set, and the ports of the services still to start free on the
 * primary IP. What is still wrong is named exactly.
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

/** Why a setting in the host's /etc is not in the running kernel yet, when it is not applied live. */
function notLive(host: HostChecks): string {
  return host.applyLive ? "" : " (not applied to the running kernel: the agent does not manage the real host)";
}

export function moduleProblems(host: HostChecks): string[] {
  const missing = host.requiredModules.filter((m) => !modulePresent(host, m));
  if (missing.length === 0) return [];
  return [`kernel module(s) ${missing.join(", ")} neither loaded nor built in${notLive(host)}`];
}

export function sysctlProblems(host: HostChecks): string[] {
  const problems: string[] = [];
  for (const [name, want] of Object.entries(host.requiredSysctls)) {
    const file = sysctlFile(host.procRoot, name);
    const actual = readTextOrUndefined(file)?.trim();
    if (actual === want) continue;
    const now = actual === undefined ? `missing (${file})` : `${actual}`;
    problems.push(`sysctl ${name} is ${now}, needs ${want}${notLive(host)}`);
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
      { port: p.corednsMetrics, owner: "coredns", what: "coredns metrics" },
      { port: p.corednsDns, owner: "coredns", what: "coredns DNS" },
      { port: p.controllerManager, owner: "kube-controller-manager", what: "kube-controller-manager secure port" },
      { port: p.scheduler, owner: "kube-scheduler", what: "kube-scheduler secure port" },
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
      const holders = socketHolders(new Set(listenersOn(port).map((l) => l.inode)));
      const who = holders.length > 0 ? holders.map((h) => `${h.comm} (pid ${h.pid})`).join(", ") : "another process";
      problems.push(`port ${port} (${what}) on ${ctx.config.primaryIp} is taken by ${who}: stop it or free the port`);
    } else if (error) problems.push(`cannot bind ${ctx.config.primaryIp}:${port} (${what}): ${error}`);
  }
  return problems;
}

async function check(ctx: PhaseContext): Promise<void> {
  const host = ctx.config.host;
  const problems = [
    swapProblem(host.procRoot),
    ...moduleProblems(host),
    ...sysctlProblems(host),
    ...(await portProblems(ctx)),
  ].filter((p): p is string => p !== undefined);
  if (problems.length > 0) throw new PhaseError(`host not ready: ${problems.join("; ")}`);
}

export const miscChecks = definePhase({
  id: "misc-checks",
  async start(ctx) {
    writeFiles(hostSettingFiles(ctx));
    const applied = await applyLive(ctx);
    await check(ctx);
    const did = applied.length > 0 ? ` (${applied.join(", ")})` : "";
    return { message: `swap off, modules present, sysctls set${did}, ports free` };
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    expectFiles(hostSettingFiles(ctx));
    await check(ctx);
    return undefined;
  },
});
