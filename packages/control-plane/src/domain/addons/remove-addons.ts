import { addons } from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { conflict } from "../../http/errors.ts";
import { recordOperation } from "../../runner/store.ts";
import type { OperationRow } from "../../runner/types.ts";
import { findCluster } from "../clusters/views.ts";

export const ADDONS_REMOVE = "addons.remove";

/**
 * `DELETE .../addons`: every add-on of the cluster goes `removing` and an `addons.remove`
 * operation is recorded in the same transaction (DESIGN.md "Operations"); the runner finishes
 * the removal. Answered at once; a cluster that is being deleted takes its add-ons with it.
 */
export async function removeAddons(
  keelson: Pick<Keelson, "db" | "runner">,
  projectId: string,
  clusterId: string,
): Promise<OperationRow> {
  const op = await keelson.db.transaction(async (tx) => {
    const cluster = await findCluster(tx, projectId, clusterId);
    if (cluster.status === "deleting") {
      throw conflict(`cluster ${cluster.name} is being deleted; its add-ons go with it`, "cluster_deleting");
    }
    const removing = await tx
      .update(addons)
      .set({ state: "removing" })
      .where(and(eq(addons.clusterId, clusterId), inArray(addons.state, ["installed", "removing"])))
      .returning({ name: addons.name });
    return recordOperation(tx, {
      projectId,
      kind: ADDONS_REMOVE,
      targetType: "cluster",
      targetId: clusterId,
      params: { addons: removing.map((a) => a.name).sort() },
    });
  });
  keelson.runner.enqueue(op);
  return op;
}
