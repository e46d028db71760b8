import { clusters, one, type Tx } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { notFound } from "../../http/errors.ts";
import { recordOperation } from "../../runner/store.ts";
import type { OperationRow } from "../../runner/types.ts";
import type { ClusterRow } from "./views.ts";

export interface ClusterTask {
  projectId: string;
  clusterId: string;
  kind: string;
  params?: object;
  /** What the cluster row shows while the task runs (taskStatus, lastOp, …); its task error is cleared. */
  mark: Partial<typeof clusters.$inferInsert>;
  /**
   * Runs first in the transaction: checks that must see the same rows as the write (a busy
   * cluster, a host in another rollout), and writes that belong to the task (assigning nodes).
   */
  first?: (tx: Tx) => Promise<void> | void;
}

/**
 * Starts a task on a cluster, the one way every cluster operation starts: in one transaction
 * the checks run, the cluster row is marked and the operation recorded; once that commits, the
 * runner takes the operation. Returns the marked row and the operation.
 */
export async function startClusterTask(
  k: Pick<Keelson, "db" | "runner">,
  task: ClusterTask,
): Promise<{ cluster: ClusterRow; operation: OperationRow }> {
  const result = await k.db.transaction(async (tx) => {
    await task.first?.(tx);
    const cluster = one(
      await tx
        .update(clusters)
        .set({ ...task.mark, taskError: "" })
        .where(eq(clusters.id, task.clusterId))
        .returning(),
    );
    // Deleted since the caller read it: the request meets a cluster that is gone.
    if (!cluster) throw notFound("cluster", task.clusterId);
    const operation = await recordOperation(tx, {
      projectId: task.projectId,
      kind: task.kind,
      targetType: "cluster",
      targetId: task.clusterId,
      ...(task.params ? { params: task.params } : {}),
    });
    return { cluster, operation };
  });
  k.runner.enqueue(result.operation);
  return result;
}
