import {
  isPhaseId,
  NODE_PHASE_STATUSES,
  NODE_ROLES,
  type NodePhaseStatus,
  type NodeRole,
  PHASE_STATES,
  type PhaseStatusRecord,
} from "@keelson/protocol";
import { readTextOrUndefined, writeFileAtomic } from "../services/atomic-file.ts";

/** The phase states as kept in the agent's state dir (phases.json). */
export interface PersistedPhaseState {
  version: 1;
  role: NodeRole;
  nodeId: string;
  nodeStatus: NodePhaseStatus;
  phases: PhaseStatusRecord[];
}

export function savePhaseState(file: string, state: PersistedPhaseState): void {
  writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

/**
 * Reads the file back; anything unreadable or of another shape counts as no saved state (the
 * phases then show `not-started` and the next status check tells the truth).
 */
export function loadPhaseState(file: string): PersistedPhaseState | undefined {
  const text = readTextOrUndefined(file);
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as PersistedPhaseState;
    if (value.version !== 1) return undefined;
    if (!(NODE_ROLES as readonly string[]).includes(value.role)) return undefined;
    if (!(NODE_PHASE_STATUSES as readonly string[]).includes(value.nodeStatus)) return undefined;
    if (!Array.isArray(value.phases)) return undefined;
    const phases = value.phases.filter(
      (p) => isPhaseId(p?.id) && (PHASE_STATES as readonly string[]).includes(p.state),
    );
    return { ...value, phases };
  } catch {
    return undefined;
  }
}
