import { clusters, type Db, nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { notImplemented } from "../../http/errors.ts";
import type { OperationKind, StepContext } from "../../operations/types.ts";
import { settledClusterStatus } from "./health.ts";
import { roleCountsOf } from "./views.ts";

export const CLUSTER_OPS = {
  create: "cluster.create",
  update: "cluster.update",
  delete: "cluster.delete",
} as const;

/** Ends a cluster task: status from the nodes, taskStatus success, lastOk when the cluster is ok. */
function settle(db: Db, clusterId: string): void {
  const counts = roleCountsOf(db, clusterId);
  const status = settledClusterStatus(counts);
  db.update(clusters)
    .set({
      status,
      taskStatus: "success",
      taskError: "",
      ...(status === "ok" ? { lastOk: new Date().toISOString() } : {}),
    })
    .where(eq(clusters.id, clusterId))
    .run();
}

/** A failed cluster task leaves the cluster's own status alone and records the task's error. */
function recordFailure(ctx: StepContext, error: Error): void {
  ctx.db
    .update(clusters)
    .set({ taskStatus: "error", taskError: error.message })
    .where(eq(clusters.id, ctx.op.targetId))
    .run();
}

function clusterExists(db: Db, clusterId: string): boolean {
  return db.select({ id: clusters.id }).from(clusters).where(eq(clusters.id, clusterId)).get() !== undefined;
}

export function clusterOperationKinds(_k: Keelson): OperationKind[] {
  return [
    {
      kind: CLUSTER_OPS.create,
      steps: (op) => [
        {
          name: "attach-nodes",
          run: () => {
            const params = op.params as { masterNodes?: string[]; workerNodes?: string[] };
            if ((params.masterNodes?.length ?? 0) + (params.workerNodes?.length ?? 0) > 0) {
              throw notImplemented("attaching nodes needs the node phases");
            }
          },
        },
        { name: "settle", run: (ctx) => settle(ctx.db, ctx.op.targetId) },
      ],
      onFailed: recordFailure,
    },
    {
      kind: CLUSTER_OPS.update,
      // Settings reach the nodes through their phases; with no phases yet there is nothing to push.
      steps: () => [{ name: "settle", run: (ctx) => settle(ctx.db, ctx.op.targetId) }],
      onFailed: recordFailure,
    },
    {
      kind: CLUSTER_OPS.delete,
      steps: () => [
        {
          name: "release-nodes",
          run: (ctx) => {
            const attached = ctx.db
              .select({ id: nodes.id })
              .from(nodes)
              .where(eq(nodes.clusterId, ctx.op.targetId))
              .all();
            if (attached.length > 0) throw notImplemented("detaching nodes needs the node phases");
          },
        },
        {
          name: "remove",
          run: (ctx) => {
            if (clusterExists(ctx.db, ctx.op.targetId)) {
              ctx.db.delete(clusters).where(eq(clusters.id, ctx.op.targetId)).run();
            }
          },
        },
      ],
      onFailed: recordFailure,
    },
  ];
}
