import { clusters, type Db, firstRow, lockRows, operations } from "@keelson/db";
import { and, eq, ne } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { isUnfinished } from "../../../runner/store.ts";
import type { StepContext } from "../../../runner/types.ts";
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

/**
 * The end of a task writes the cluster's status only while no other task of the cluster is
 * pending or running: a create that finishes after an attach started (a client that creates
 * and attaches at once) must not overwrite the attach's `creating`; the last task to end
 * settles the cluster. The row is locked first and the check is a statement of its own: on
 * PostgreSQL an update that waited for a row lock re-checks its row but not a subquery, which
 * still sees the database as it was before the wait.
 */
async function writeIfNoOtherTask(ctx: StepContext, set: Partial<typeof clusters.$inferInsert>): Promise<void> {
  const id = eq(clusters.id, ctx.op.targetId);
  await ctx.db.transaction(async (tx) => {
    await lockRows(tx, clusters, id);
    const other = firstRow(
      await tx
        .select({ id: operations.id })
        .from(operations)
        .where(and(eq(operations.targetId, ctx.op.targetId), isUnfinished(), ne(operations.id, ctx.op.id)))
        .limit(1),
    );
    if (!other) await tx.update(clusters).set(set).where(id);
  });
}

/** Ends a cluster task: status from the nodes, taskStatus success, lastOk when the cluster is ok, plus `extra`. */
export async function settleClusterTask(
  k: Pick<Keelson, "agents">,
  ctx: StepContext,
  extra: Partial<typeof clusters.$inferInsert> = {},
): Promise<void> {
  const status = await currentClusterStatus(k, ctx.db, ctx.op.targetId);
  await writeIfNoOtherTask(ctx, {
    status,
    taskStatus: "success",
    taskError: "",
    ...(status === "ok" ? { lastOk: new Date().toISOString() } : {}),
    ...extra,
  });
}

/** Records a failed cluster task (taskStatus error and why), under the same rule as settling. */
export async function recordTaskFailure(
  ctx: StepContext,
  error: Error,
  extra: Partial<typeof clusters.$inferInsert> = {},
): Promise<void> {
  await writeIfNoOtherTask(ctx, { taskStatus: "error", taskError: error.message, ...extra });
}
