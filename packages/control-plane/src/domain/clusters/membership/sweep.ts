import { type Db, nodes } from "@keelson/db";
import { AGENT_CAPABILITIES, type CommandResult } from "@keelson/protocol";
import { and, eq } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Keelson } from "../../../context.ts";

/**
 * Asking a master of the cluster to sweep its Nodes now (`node.sweep`): label the workers that
 * registered, delete the Nodes of workers that left (a kubelet may do neither; the agent's
 * node-sweep.ts). Every master also sweeps on its status pass (30 s by default), so this only
 * makes it prompt: best effort, never failing the operation. One master is enough (they share the
 * cluster's API); the first connected one that takes the command does it, on whichever replica
 * holds its link (the command relay). Masters whose agent predates the command sweep on their
 * pass.
 */

const SWEEP_TIMEOUT_MS = 15_000;

/** The cluster's masters whose agents, linked to any replica, take node.sweep. */
async function sweepingMasters(k: Keelson, db: Db, clusterId: string): Promise<string[]> {
  const masters = await db
    .select({ id: nodes.id })
    .from(nodes)
    .where(and(eq(nodes.clusterId, clusterId), eq(nodes.isMaster, 1)));
  return masters.map((m) => m.id).filter((id) => k.agents.supports(id, AGENT_CAPABILITIES.nodeSweep) === true);
}

export async function sweepNow(
  k: Keelson,
  db: Db,
  clusterId: string,
  log: FastifyBaseLogger,
): Promise<CommandResult<"node.sweep"> | undefined> {
  for (const id of await sweepingMasters(k, db, clusterId)) {
    try {
      const result = await k.agents.sendCommand(id, "node.sweep", { clusterId }, { timeoutMs: SWEEP_TIMEOUT_MS });
      if (result.labelled.length > 0 || result.removed.length > 0) {
        log.info({ clusterId, master: id, ...result }, "a master swept the cluster's Nodes");
      }
      return result;
    } catch (err) {
      log.warn({ err, clusterId, master: id }, "a master did not sweep the cluster's Nodes; trying the next");
    }
  }
  log.debug({ clusterId }, "no master here took node.sweep: the masters' status passes sweep");
  return undefined;
}

/**
 * Sweep requests of a batch of joining workers, coalesced: one sweep in flight and at most one
 * more after it, however many workers ask meanwhile (a thousand workers are not a thousand
 * commands). The one after covers a worker that registered while the first was listing.
 */
export function sweepCoalescer(sweep: () => Promise<unknown>): { request(): void; idle(): Promise<void> } {
  let running: Promise<void> | undefined;
  let again = false;
  const run = (): Promise<void> =>
    sweep()
      .catch(() => undefined)
      .then(() => {
        if (!again) {
          running = undefined;
          return;
        }
        again = false;
        return run();
      });
  return {
    request() {
      if (running) again = true;
      else running = run();
    },
    async idle() {
      await running;
    },
  };
}

/** A worker's report that says it waits for a master to label it (or gave up waiting and retries). */
export function waitsForRoleLabel(phases: unknown[]): boolean {
  return phases.some((p) => {
    const phase = p as { id?: unknown; state?: unknown } | null;
    return phase?.id === "node-taints" && (phase.state === "executing" || phase.state === "failed");
  });
}
