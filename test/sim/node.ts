import {
  type NodePhaseReport,
  type NodePhaseStatus,
  type NodeRole,
  type PhaseId,
  type PhaseStatusRecord,
  phasesForRole,
} from "./deps.ts";

/** What a simulated node is a member of (the part of `node.join` the simulator keeps). */
export interface SimMembership {
  clusterId: string;
  role: NodeRole;
}

/**
 * The phase reports a simulated node sends, shaped exactly like the real phase engine's
 * (packages/agent/src/phases/engine.ts): the role's phases in order, stop-only ones (drain)
 * left `not-started` because start never runs them, the first failure `failed` with its error
 * and the phases after it `not-started`.
 */
export function simPhases(
  role: NodeRole,
  outcome: "converging" | "ok" | { failed: PhaseId; error: string },
  at: Date,
): PhaseStatusRecord[] {
  const iso = at.toISOString();
  const failedOrder =
    typeof outcome === "object" ? phasesForRole(role).find((p) => p.id === outcome.failed)?.order : undefined;
  return phasesForRole(role).map((def, i) => {
    const base: PhaseStatusRecord = {
      id: def.id as PhaseId,
      name: def.name,
      order: def.order,
      state: "not-started",
      lastError: null,
      message: null,
      startedAt: null,
      finishedAt: null,
      durationMs: null,
    };
    if (def.stopOnly) return base;
    if (outcome === "converging") return i === 0 ? { ...base, state: "executing", startedAt: iso } : base;
    const done = { ...base, startedAt: iso, finishedAt: iso, durationMs: 0 };
    if (failedOrder === undefined) return { ...done, state: "running" };
    if (def.order < failedOrder) return { ...done, state: "running" };
    if (def.order === failedOrder) return { ...done, state: "failed", lastError: (outcome as { error: string }).error };
    return base;
  });
}

export function simReport(
  membership: SimMembership | undefined,
  status: NodePhaseStatus,
  phases: PhaseStatusRecord[],
): { clusterId: string | null; report: NodePhaseReport; apiResponding: boolean } {
  if (!membership) return { clusterId: null, report: { status: "ok", phases: [] }, apiResponding: false };
  const apiResponding = membership.role === "master" && status === "ok";
  return { clusterId: membership.clusterId, report: { status, phases }, apiResponding };
}
