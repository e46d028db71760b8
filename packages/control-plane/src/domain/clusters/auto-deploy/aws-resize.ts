import { nodes } from "@keelson/db";
import { and, eq, inArray, isNotNull } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import type { OperationStep, StepContext } from "../../../runner/types.ts";
import { resizeWorkers, workerSizes } from "../../cloud-providers/aws/deploy/create.ts";
import { describeWorkerGroup, terminateWorkers } from "../../cloud-providers/aws/deploy/worker-group.ts";
import { settleClusterTask } from "../health/settle.ts";
import { joinWorkersStep, releaseNodes, stringList } from "../operations.ts";
import { clusterRow, forgetHosts, targetOf } from "./aws-context.ts";
import { attachWorkersStep } from "./aws-hosts.ts";
import { awsDeploySpec } from "./aws-spec.ts";
import { renewBeforeLaunch } from "./token-claim.ts";

/**
 * Update of an auto-deployed cluster's worker counts (numWorkers, or the autoscaler's bounds).
 *
 * Fewer workers: Keelson picks the instances to remove (pickRemoved), each one's host leaves
 * the cluster through the detach path (node.leave drains it, and its Kubernetes Node is
 * deleted), then each instance is terminated with TerminateInstanceInAutoScalingGroup and the
 * group's desired capacity decremented, and its host is forgotten. The pick, the instances
 * terminated so far and the hosts that left are kept in the operation's progress, so a
 * control-plane restart resumes where it stopped and terminates no instance twice.
 *
 * Then the group takes the stored spec's sizes (more workers: it launches them), the hosts of
 * instances the group itself let go are forgotten, and new instances' hosts are attached and
 * joined as at create. First of all, the instance join token is renewed if it is close to
 * expiry (aws-token.ts), through the look's claim (token-claim.ts).
 */

/**
 * The instances a shrink removes, `group.length - keep` of them: first those whose host never
 * registered (they carry no workload), then the newest hosts by registration time, so the
 * workers that have run longest stay. Ties go by instance id, so the pick is the same when
 * computed again.
 */
export function pickRemoved(
  group: readonly string[],
  registeredAt: ReadonlyMap<string, string>,
  keep: number,
): string[] {
  const excess = group.length - keep;
  if (excess <= 0) return [];
  const order = [...group].sort((a, b) => {
    const ra = registeredAt.get(a);
    const rb = registeredAt.get(b);
    if ((ra === undefined) !== (rb === undefined)) return ra === undefined ? -1 : 1;
    return (rb ?? "").localeCompare(ra ?? "") || b.localeCompare(a);
  });
  return order.slice(0, excess);
}

const pickStep = (k: Keelson): OperationStep => ({
  name: "aws-pick-removed",
  run: async (ctx) => {
    if (Array.isArray(ctx.progress.removing)) return;
    const cluster = await clusterRow(ctx.db, ctx.op.targetId);
    const group = await describeWorkerGroup(await targetOf(k, cluster));
    const { DesiredCapacity } = workerSizes(awsDeploySpec(cluster.spec, ""));
    const members = group?.instances ?? [];
    const hosts = members.length
      ? await ctx.db
          .select({
            id: nodes.id,
            instance: nodes.cloudInstanceId,
            createdAt: nodes.createdAt,
            clusterId: nodes.clusterId,
          })
          .from(nodes)
          .where(and(eq(nodes.projectId, ctx.op.projectId), inArray(nodes.cloudInstanceId, members)))
      : [];
    const removing = pickRemoved(
      members,
      new Map(hosts.map((h) => [h.instance as string, h.createdAt])),
      DesiredCapacity,
    );
    const leaving = hosts.filter((h) => removing.includes(h.instance as string) && h.clusterId === cluster.id);
    await ctx.saveProgress({ removing, leaving: leaving.map((h) => h.id) });
  },
});

const shrinkSteps = (k: Keelson): OperationStep[] => [
  pickStep(k),
  {
    // The detach path: each leaves (drained), its Node object goes; hosts that left already are skipped.
    name: "aws-leave-removed",
    run: (ctx) => releaseNodes(k, ctx, { masters: [], workers: stringList(ctx.progress.leaving) }),
  },
  {
    name: "aws-terminate-removed",
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      const done = new Set(stringList(ctx.progress.terminated));
      const todo = stringList(ctx.progress.removing).filter((id) => !done.has(id));
      await terminateWorkers(await targetOf(k, cluster), todo, async (id) => {
        done.add(id);
        await ctx.saveProgress({ terminated: [...done] });
      });
    },
  },
  {
    name: "aws-forget-terminated",
    run: (ctx) => forgetHosts(k, ctx, stringList(ctx.progress.removing), "when its cluster's workers were reduced"),
  },
];

export const resizeSteps = (k: Keelson): OperationStep[] => [
  {
    // Before the group launches anything: the instances must boot with a token that still works.
    // Through the look's claim, so a sweep on another replica does not renew beside it.
    name: "aws-renew-token",
    run: async (ctx) => {
      await renewBeforeLaunch(k, ctx.op.targetId, ctx.signal);
    },
  },
  ...shrinkSteps(k),
  {
    name: "aws-resize-group",
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      await resizeWorkers(await targetOf(k, cluster), awsDeploySpec(cluster.spec, ""));
    },
  },
  {
    // Instances the group let go on its own (a failed health check, the autoscaler's scale-in).
    name: "aws-forget-removed",
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      const group = new Set((await describeWorkerGroup(await targetOf(k, cluster)))?.instances ?? []);
      const attached = await ctx.db
        .select({ instance: nodes.cloudInstanceId })
        .from(nodes)
        .where(and(eq(nodes.clusterId, cluster.id), eq(nodes.isMaster, 0), isNotNull(nodes.cloudInstanceId)));
      const removed = attached.map((r) => r.instance as string).filter((id) => !group.has(id));
      await forgetHosts(k, ctx, removed, "when its cluster's workers were resized");
    },
  },
  attachWorkersStep(k),
  joinWorkersStep(k, (ctx) => stringList(ctx.progress.workers)),
  { name: "settle", run: (ctx: StepContext) => settleClusterTask(k, ctx) },
];
