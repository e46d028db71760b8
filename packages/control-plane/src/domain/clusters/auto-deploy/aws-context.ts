import { clusters, type Db, firstRow, nodes } from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import type { StepContext } from "../../../runner/types.ts";
import type { DeployState } from "../../cloud-providers/aws/deploy/create.ts";
import type { DeployTarget } from "../../cloud-providers/aws/deploy/target.ts";
import { storedAccount } from "../../cloud-providers/cloud-checks.ts";
import type { ClusterRow } from "../views.ts";

/** What every auto-deploy step reads first: the cluster, where its cloud resources live, what they are. */
export async function clusterRow(db: Db, id: string): Promise<ClusterRow> {
  const row = firstRow(await db.select().from(clusters).where(eq(clusters.id, id)));
  if (!row) throw new Error(`cluster ${id} is gone`);
  return row;
}

export async function targetOf(k: Keelson, cluster: ClusterRow): Promise<DeployTarget> {
  return {
    account: await storedAccount(k, cluster.cloudProviderId),
    region: cluster.spec.region as string,
    clusterId: cluster.id,
    calls: 0,
  };
}

/** The ids the create's cloud steps returned, kept in the operation's progress. */
export const deployState = (ctx: StepContext) => (ctx.progress.aws ?? {}) as DeployState;

/** Terminated instances' hosts never come back: their rows and agent links go. */
export async function forgetHosts(k: Keelson, ctx: StepContext, instances: string[], why: string): Promise<void> {
  if (instances.length === 0) return;
  const gone = await ctx.db
    .delete(nodes)
    .where(and(eq(nodes.projectId, ctx.op.projectId), inArray(nodes.cloudInstanceId, instances)))
    .returning({ id: nodes.id });
  for (const { id } of gone) k.agents.revoke(id, `its instance was terminated ${why}`);
}
