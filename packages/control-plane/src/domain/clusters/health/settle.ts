import { clusters, type Db } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { roleCountsOf } from "../views.ts";
import { settledClusterStatus } from "./health.ts";

/**
 * The cluster's status as its nodes are now. Presence (who is connected) reaches the nodes
 * table in batches, so the pending part is written first: an agent that just came back must
 * count, or a task would end on a stale `error` that no later event corrects.
 */
export async function currentClusterStatus(
  k: Pick<Keelson, "agents">,
  db: Db,
  clusterId: string,
): Promise<"pending" | "ok" | "error"> {
  await k.agents.flushPresence();
  return settledClusterStatus(await roleCountsOf(db, clusterId));
}

/** Ends a cluster task: status from the nodes, taskStatus success, lastOk when the cluster is ok, plus `extra`. */
export async function settleClusterTask(
  k: Pick<Keelson, "agents">,
  db: Db,
  clusterId: string,
  extra: Partial<typeof clusters.$inferInsert> = {},
): Promise<void> {
  const status = await currentClusterStatus(k, db, clusterId);
  await db
    .update(clusters)
    .set({
      status,
      taskStatus: "success",
      taskError: "",
      ...(status === "ok" ? { lastOk: new Date().toISOString() } : {}),
      ...extra,
    })
    .where(eq(clusters.id, clusterId));
}
