import { clusters, firstRow, lockRows, one, type Tx } from "@keelson/db";
import { and, eq } from "drizzle-orm";
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
   * Runs in the transaction once the cluster row is locked, with that row as it is now: checks
   * that must see the same rows as the write (a busy cluster, a host in another rollout, etcd
   * quorum), and writes that belong to the task (assigning nodes). What it returns adds to the
   * operation's params and to the mark.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a check-only callback returns nothing.
  first?: (tx: Tx, cluster: ClusterRow) => Promise<TaskAdditions | void>;
}

export interface TaskAdditions {
  /** Another kind than the task's, when what it does depends on the locked row (an AWS resize). */
  kind?: string;
  params?: object;
  mark?: ClusterTask["mark"];
}

/**
 * Starts a task on a cluster, the one way every cluster operation starts: in one transaction
 * the cluster row is locked, the checks run, the row is marked and the operation recorded; once
 * that commits, the runner takes the operation. Returns the marked row and the operation.
 *
 * The lock is what makes "check, then write" hold on PostgreSQL, where two requests run their
 * transactions at once on two connections: the second task on a cluster waits at the lock
 * until the first commits, and its checks then see the first's operation and nodes. (On SQLite
 * a transaction holds the one connection, so the second waits anyway.)
 */
export async function startClusterTask(
  k: Pick<Keelson, "db" | "runner">,
  task: ClusterTask,
): Promise<{ cluster: ClusterRow; operation: OperationRow }> {
  const byId = and(eq(clusters.id, task.clusterId), eq(clusters.projectId, task.projectId));
  const result = await k.db.transaction(async (tx) => {
    const locked = firstRow(await lockRows(tx, clusters, byId));
    // Deleted since the caller read it: the request meets a cluster that is gone.
    if (!locked) throw notFound("cluster", task.clusterId);
    const more = await task.first?.(tx, locked);
    const cluster = one(
      await tx
        .update(clusters)
        .set({ ...task.mark, ...more?.mark, taskError: "" })
        .where(byId)
        .returning(),
    );
    const params = task.params || more?.params ? { ...task.params, ...more?.params } : undefined;
    const operation = await recordOperation(tx, {
      projectId: task.projectId,
      kind: more?.kind ?? task.kind,
      targetType: "cluster",
      targetId: task.clusterId,
      ...(params ? { params } : {}),
    });
    return { cluster, operation };
  });
  k.runner.enqueue(result.operation);
  return result;
}
