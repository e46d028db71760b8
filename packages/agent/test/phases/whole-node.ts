import { join } from "node:path";
import type { NodeConfig } from "../../src/phases/config.ts";
import { PhaseEngine } from "../../src/phases/engine.ts";
import { ALL_PHASES } from "../../src/phases/impl/index.ts";
import { Reconciler } from "../../src/phases/reconciler.ts";
import type { SignCsr } from "../../src/phases/types.ts";
import { DirectSupervisor } from "../../src/services/direct.ts";
import { testLog } from "./helpers.ts";

/**
 * Every phase of one node with real processes under its host root: the engine, its supervisor
 * (the caller closes it), and the reconcile that brings the node to ok.
 */
export function wholeNode(root: string, config: NodeConfig, signCsr: SignCsr) {
  const services = new DirectSupervisor({
    hostRoot: config.hostRoot,
    log: testLog(),
    restartBackoff: { initialMs: 200, maxMs: 1000 },
  });
  const engine = new PhaseEngine({
    config,
    phases: ALL_PHASES,
    stateFile: join(root, "state", "phases.json"),
    log: testLog(),
    services,
    signCsr,
    phaseTimeoutMs: 30_000,
  });
  return { services, engine };
}

/** Reconciles until the node is ok or 45 s pass; a failed phase fails the test at once, naming it. */
export async function reconcileUntilOk(engine: PhaseEngine): Promise<void> {
  const reconciler = new Reconciler(engine, testLog(), { checkIntervalMs: 60_000 });
  reconciler.run();
  try {
    const deadline = Date.now() + 45_000;
    while (engine.nodeStatus !== "ok" && Date.now() < deadline) {
      const failed = engine.list().find((p) => p.state === "failed");
      if (failed) throw new Error(`${failed.id} failed: ${failed.lastError}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reconciler.halt();
  }
}
