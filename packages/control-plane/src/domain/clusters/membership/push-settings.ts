import { clusters, firstRow } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import type { StepContext } from "../../../runner/types.ts";
import { attachedNodeIds } from "./membership.ts";

const SETTINGS_TIMEOUT_MS = 10_000;

/**
 * Sends the cluster's current spec to its connected nodes (`node.settings`) after an update,
 * so what a node schedules from it (etcd backups) follows at once. Best effort: a node that
 * is offline or does not answer gets the settings with its next join (every join carries
 * them), so it neither fails nor holds up the update.
 */
export async function pushSettings(k: Keelson, ctx: StepContext): Promise<void> {
  const clusterId = ctx.op.targetId;
  const row = firstRow(await ctx.db.select({ spec: clusters.spec }).from(clusters).where(eq(clusters.id, clusterId)));
  if (!row) return;
  const settings = { ...row.spec };
  const targets = (await attachedNodeIds(ctx.db, clusterId)).filter((n) => k.agents.isConnected(n.id));
  await Promise.all(
    targets.map(async ({ id }) => {
      try {
        await k.agents.sendCommand(id, "node.settings", { clusterId, settings }, { timeoutMs: SETTINGS_TIMEOUT_MS });
      } catch (err) {
        ctx.log.warn(
          { err, nodeId: id, clusterId },
          "node did not take the new cluster settings; it gets them on its next join",
        );
      }
    }),
  );
}
