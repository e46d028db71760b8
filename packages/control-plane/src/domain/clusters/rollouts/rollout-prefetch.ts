import type { NodePackageRef } from "@keelson/protocol";
import { HostOfflineError } from "../../../agents/errors.ts";
import type { Keelson } from "../../../context.ts";
import { OperationInterrupted, type OperationStep, type StepContext } from "../../../runner/types.ts";
import { nodePackageRef, nodePackageRefusal } from "../../packages/node-shelf.ts";
import { label, type RolloutNode } from "./rollout-nodes.ts";

/** Nodes asked at once: a download each, so not all thousand of them together. */
const PREFETCH_CONCURRENCY = 50;

/**
 * The first step of an upgrade whose target has a stored node package: every connected node
 * still to upgrade fetches and installs it (`node.prefetch`) while all of them still run. A node
 * that cannot get it fails the upgrade here, before any node restarted, naming it; the nodes'
 * upgrades later spend no time downloading. A node whose agent is too old for node packages
 * fails it here too. Offline nodes fetch at their own upgrade instead. Idempotent (an
 * installed package is found in place), so a resumed upgrade runs it again cheaply.
 */
export function prefetchStep(
  k: Keelson,
  target: string,
  nodes: () => RolloutNode[],
  /** Of these nodes, the ids already done (at the target). */
  skip: (nodes: RolloutNode[]) => Promise<Set<string>>,
): OperationStep {
  return {
    name: "prefetch-packages",
    run: async (ctx) => {
      const nodePackage = await nodePackageRef(k, target);
      if (!nodePackage) return;
      const connected = nodes().filter((n) => k.agents.isConnected(n.id));
      const skipped = await skip(connected);
      const todo = connected.filter((n) => !skipped.has(n.id));
      const failures: string[] = [];
      let next = 0;
      const worker = async () => {
        while (next < todo.length) {
          const node = todo[next++] as RolloutNode;
          const why = await prefetchOne(k, ctx, node, nodePackage);
          if (why) failures.push(`${label(node)}: ${why}`);
        }
      };
      await Promise.all(Array.from({ length: Math.min(PREFETCH_CONCURRENCY, todo.length) }, worker));
      if (ctx.signal.aborted) throw new OperationInterrupted();
      ctx.log.info({ nodes: todo.length, failed: failures.length, target }, "node package fetched ahead");
      if (failures.length > 0) {
        const shown = failures.slice(0, 3).join("; ");
        const more = failures.length > 3 ? `; and ${failures.length - 3} more` : "";
        throw new Error(
          `${failures.length} of ${todo.length} nodes could not fetch the node package of ${target}, so no node ` +
            `was upgraded: ${shown}${more}`,
        );
      }
    },
  };
}

/** Why this node could not fetch the package, or undefined when it has it (or will fetch it itself). */
async function prefetchOne(
  k: Keelson,
  ctx: StepContext,
  node: RolloutNode,
  nodePackage: NodePackageRef,
): Promise<string | undefined> {
  if (ctx.signal.aborted) return undefined;
  const refused = nodePackageRefusal(k.agents, node.id, label(node));
  if (refused) return refused;
  try {
    await k.agents.sendCommand(
      node.id,
      "node.prefetch",
      { clusterId: ctx.op.targetId, nodePackage },
      { timeoutMs: k.settings.nodeRestartTimeoutMs },
    );
    return undefined;
  } catch (err) {
    if (ctx.signal.aborted || err instanceof HostOfflineError) return undefined;
    return err instanceof Error ? err.message : String(err);
  }
}
