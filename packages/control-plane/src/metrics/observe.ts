import type { PhaseState } from "@keelson/protocol";
import type { NodeEvents } from "../agents/node-events.ts";
import type { OperationRunner } from "../runner/runner.ts";
import type { ControlPlaneMetrics } from "./registry.ts";

/** How a command sent to an agent ended, as the hub's metrics observer hears it. */
export type CommandOutcome = "succeeded" | "failed" | "timeout" | "offline";

/** What the agent hub tells the metrics about each command (AgentHubOptions.onCommand). */
export function commandObserver(metrics: ControlPlaneMetrics) {
  return {
    sent(command: string): void {
      metrics.commandsSent.inc({ command });
    },
    settled(command: string, outcome: CommandOutcome, seconds: number): void {
      if (outcome !== "succeeded") metrics.commandsFailed.inc({ command, reason: outcome });
      // Offline: never sent, so no latency to speak of.
      if (outcome !== "offline") metrics.commandDuration.observe({ command, outcome }, seconds);
    },
  };
}
export type CommandObserver = ReturnType<typeof commandObserver>;

/**
 * Counts link changes, operation ends and phase transitions from the events the hub and the
 * runner already emit. A phase's duration and failure are counted once per transition, not
 * once per report: an agent re-sends every phase in each report. Returns the unsubscribe.
 */
export function observeEvents(
  metrics: ControlPlaneMetrics,
  sources: { nodeEvents: NodeEvents; runner: OperationRunner },
): () => void {
  const seenHosts = new Set<string>();
  const phaseStates = new Map<string, Map<string, PhaseState>>();
  const { all } = sources.nodeEvents;

  const onLink = (e: { hostId: string; connected: boolean }) => {
    if (!e.connected) {
      metrics.agentLinkDisconnects.inc();
      return;
    }
    metrics.agentLinkConnects.inc();
    if (seenHosts.has(e.hostId)) metrics.agentLinkReconnects.inc();
    else seenHosts.add(e.hostId);
  };
  const onReport = (e: {
    hostId: string;
    report: { phases: { id: string; state: PhaseState; durationMs: number | null }[] };
  }) => {
    const last = phaseStates.get(e.hostId) ?? new Map<string, PhaseState>();
    phaseStates.set(e.hostId, last);
    for (const phase of e.report.phases) {
      const before = last.get(phase.id);
      last.set(phase.id, phase.state);
      if (before === phase.state) continue;
      if (phase.state === "failed") metrics.phaseFailures.inc({ phase: phase.id });
      if (phase.state === "running" && phase.durationMs !== null) {
        metrics.phaseDuration.observe({ phase: phase.id }, phase.durationMs / 1000);
      }
    }
  };
  const onOperation = (e: { type: string; kind: string; state: string; durationMs?: number }) => {
    if (e.type === "operation.finished" && e.durationMs !== undefined) {
      metrics.operationDuration.observe({ kind: e.kind, state: e.state }, e.durationMs / 1000);
    }
  };
  all.on("link", onLink);
  all.on("node-report", onReport);
  sources.runner.events.on("event", onOperation);
  return () => {
    all.off("link", onLink);
    all.off("node-report", onReport);
    sources.runner.events.off("event", onOperation);
  };
}
