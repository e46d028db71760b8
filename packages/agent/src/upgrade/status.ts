import { STATE_FILES, type StateDir } from "../state-dir.ts";

/**
 * Outcome of the last self-upgrade, kept in the state dir because it must outlive the
 * restart: a failure is found by one process (the agent, or the launcher after a new version
 * did not come up) and reported by the next. `failed` stays the host's agent error until the
 * next upgrade succeeds or starts.
 */
export type UpgradeOutcome =
  | { state: "switched"; version: string; from: string; at: string }
  | { state: "succeeded"; version: string; from: string; at: string }
  | { state: "failed"; version: string; error: string; at: string };

export function readUpgradeOutcome(stateDir: StateDir): UpgradeOutcome | undefined {
  return stateDir.readJson<UpgradeOutcome>(STATE_FILES.upgradeStatus);
}

export function writeUpgradeOutcome(stateDir: StateDir, outcome: UpgradeOutcome): void {
  stateDir.writeJson(STATE_FILES.upgradeStatus, outcome);
}

/** The error a host should show for the last upgrade, if it failed. */
export function upgradeError(outcome: UpgradeOutcome | undefined): string | undefined {
  return outcome?.state === "failed" ? outcome.error : undefined;
}
