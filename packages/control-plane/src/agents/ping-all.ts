import { CommandFailedError, CommandTimeoutError, HostOfflineError } from "./errors.ts";
import type { AgentHub } from "./hub.ts";

export interface PingReport {
  /** Hosts pinged (those with a live link when the request arrived). */
  hosts: number;
  ok: number;
  failed: number;
  timedOut: number;
  offline: number;
  /** From sending the first ping to the last answer (or timeout). */
  totalMs: number;
  /** Round trips of the successful pings. */
  latencyMs: { min: number; p50: number; p95: number; p99: number; max: number } | null;
}

/**
 * Sends `ping` to every connected host (of one project, or all) at once and reports the round
 * trips: an operator's "are all my agents really answering?" and the benchmark's measure of
 * command latency across the whole fleet.
 */
export async function pingAll(hub: AgentHub, options: { projectId?: string; timeoutMs: number }): Promise<PingReport> {
  const hosts = hub.connectedHosts(options.projectId);
  const started = performance.now();
  const outcomes = await Promise.all(
    hosts.map(async (hostId) => {
      const t0 = performance.now();
      try {
        await hub.sendCommand(hostId, "ping", {}, { timeoutMs: options.timeoutMs });
        return { kind: "ok" as const, ms: performance.now() - t0 };
      } catch (err) {
        if (err instanceof CommandTimeoutError) return { kind: "timedOut" as const };
        if (err instanceof HostOfflineError) return { kind: "offline" as const };
        if (err instanceof CommandFailedError) return { kind: "failed" as const };
        throw err;
      }
    }),
  );
  const totalMs = performance.now() - started;
  const latencies = outcomes.flatMap((o) => (o.kind === "ok" ? [o.ms] : [])).sort((a, b) => a - b);
  const count = (kind: string) => outcomes.filter((o) => o.kind === kind).length;
  const at = (q: number) =>
    round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] as number);
  return {
    hosts: hosts.length,
    ok: latencies.length,
    failed: count("failed"),
    timedOut: count("timedOut"),
    offline: count("offline"),
    totalMs: round(totalMs),
    latencyMs:
      latencies.length === 0
        ? null
        : { min: at(0), p50: at(0.5), p95: at(0.95), p99: at(0.99), max: round(latencies.at(-1) as number) },
  };
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}
