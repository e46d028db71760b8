import { setTimeout as sleep } from "node:timers/promises";
import { type AutoScalingGroupsType, DescribeAutoScalingGroupsCommand } from "@aws-sdk/client-auto-scaling";
import { DescribeInstancesCommand, type DescribeInstancesResult } from "@aws-sdk/client-ec2";
import { clusters, type Db, firstRow, lockRows, nodes } from "@keelson/db";
import { and, eq, inArray, isNotNull } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { OperationInterrupted, type OperationStep, type StepContext } from "../../../runner/types.ts";
import {
  DEPLOY_STEPS,
  type DeployState,
  resizeWorkers,
  workerGroupName,
  workerSizes,
} from "../../cloud-providers/aws/deploy/create.ts";
import { clusterFilter, type DeployTarget, send } from "../../cloud-providers/aws/deploy/target.ts";
import { teardownAll } from "../../cloud-providers/aws/deploy/teardown.ts";
import { storedAccount } from "../../cloud-providers/cloud-checks.ts";
import { createJoinToken, JOIN_TOKEN_MAX_MINUTES } from "../../identity/join-tokens.ts";
import { agentInstallCommand } from "../../install/agent-install.ts";
import { settleClusterTask } from "../health/settle.ts";
import { planAttach } from "../membership/attach.ts";
import { deadlineIn } from "../membership/membership.ts";
import {
  CLUSTER_OPS,
  joinMastersStep,
  joinWorkersStep,
  releaseNodes,
  removeCluster,
  stringList,
} from "../operations.ts";
import type { ClusterRow } from "../views.ts";
import { awsDeploySpec } from "./aws-spec.ts";
import { instanceUserData } from "./user-data.ts";

/**
 * Auto deploy on AWS as operations (DESIGN.md "Operations"). Create: the cluster's instance
 * join token, the seven cloud steps of aws/deploy/create.ts as cursor steps (each finds what an
 * earlier run made, so a step cut off by a crash runs again without duplicating anything), then
 * the instances' hosts attached as their agents register (masters first, through the attach path
 * of manual deploy) and joined, and the task settles as any create does. Progress carries across
 * the steps: the ids the cloud steps return, the token (encrypted), the attached hosts.
 * Delete: the hosts leave, every tagged resource is torn down, the hosts' rows and the token go.
 */
export interface AwsCreateParams {
  /** The control plane's URL as the request reached it (or KEELSON_PUBLIC_URL): where agents register. */
  controlPlane: string;
}

async function clusterRow(db: Db, id: string): Promise<ClusterRow> {
  const row = firstRow(await db.select().from(clusters).where(eq(clusters.id, id)));
  if (!row) throw new Error(`cluster ${id} is gone`);
  return row;
}

async function targetOf(k: Keelson, cluster: ClusterRow): Promise<DeployTarget> {
  return {
    account: await storedAccount(k, cluster.cloudProviderId),
    region: cluster.spec.region as string,
    clusterId: cluster.id,
    calls: 0,
  };
}

const deployState = (ctx: StepContext) => (ctx.progress.aws ?? {}) as DeployState;

/** The token lives a week (the longest any join token does): hosts the group replaces later need it. */
const tokenStep = (k: Keelson): OperationStep => ({
  name: "aws-join-token",
  run: async (ctx) => {
    if (typeof ctx.progress.joinTokenEnc === "string") return;
    const issued = await createJoinToken(ctx.db, ctx.op.projectId, {
      clusterId: ctx.op.targetId,
      expiresInMinutes: JOIN_TOKEN_MAX_MINUTES,
    });
    await ctx.saveProgress({ joinTokenEnc: k.cipher.encrypt(issued.token) });
  },
});

function userDataOf(k: Keelson, ctx: StepContext, cluster: ClusterRow): string {
  const { controlPlane } = ctx.op.params as unknown as AwsCreateParams;
  const token = k.cipher.decrypt(ctx.progress.joinTokenEnc as string);
  const install = agentInstallCommand(controlPlane, k.tls?.caCertHash ?? null, token);
  if (!install) throw new Error(`hosts cannot be told to trust ${controlPlane}: it is plain HTTP and not loopback`);
  return instanceUserData(install, {
    controlPlane,
    ...(cluster.spec.httpProxy ? { httpProxy: cluster.spec.httpProxy } : {}),
  });
}

const cloudSteps = (k: Keelson): OperationStep[] =>
  DEPLOY_STEPS.map(([name, step]) => ({
    name,
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      const state = deployState(ctx);
      const made = await step(
        await targetOf(k, cluster),
        awsDeploySpec(cluster.spec, userDataOf(k, ctx, cluster)),
        state,
      );
      await ctx.saveProgress({ aws: { ...state, ...made } });
    },
  }));

async function pause(ctx: StepContext, ms: number): Promise<void> {
  try {
    await sleep(ms, undefined, { signal: ctx.signal });
  } catch {
    throw new OperationInterrupted();
  }
}

type HostRow = { id: string; cloudInstanceId: string | null; clusterId: string | null };

/**
 * Waits until `ready` holds of the hosts registered in the cluster's node pool with an instance
 * id and a live link (an instance boots, installs, registers and connects in its own time).
 */
async function awaitHosts(
  k: Keelson,
  ctx: StepContext,
  what: string,
  ready: (hosts: HostRow[]) => HostRow[] | undefined | Promise<HostRow[] | undefined>,
): Promise<HostRow[]> {
  const cluster = await clusterRow(ctx.db, ctx.op.targetId);
  const deadline = deadlineIn(k.settings.nodeConvergeTimeoutMs, ctx);
  for (;;) {
    const rows = await ctx.db
      .select({
        id: nodes.id,
        cloudInstanceId: nodes.cloudInstanceId,
        clusterId: nodes.clusterId,
        agentConnected: nodes.agentConnected,
      })
      .from(nodes)
      .where(and(eq(nodes.nodePoolId, cluster.nodePoolId), isNotNull(nodes.cloudInstanceId)));
    const live = rows.filter((r) => k.agents.isConnected(r.id) || r.agentConnected === 1);
    const found = await ready(live);
    if (found) return found;
    if (Date.now() > deadline.at)
      throw new Error(`${what} did not register within ${k.settings.nodeConvergeTimeoutMs} ms`);
    await pause(ctx, 500);
  }
}

/** Attaches the hosts not attached yet, through manual deploy's attach rules, with the cluster locked. */
async function attach(k: Keelson, ctx: StepContext, hosts: HostRow[], isMaster: boolean): Promise<void> {
  const todo = hosts.filter((h) => h.clusterId !== ctx.op.targetId);
  if (todo.length === 0) return;
  await ctx.db.transaction(async (tx) => {
    await lockRows(tx, clusters, eq(clusters.id, ctx.op.targetId));
    const entries = todo.map((h, i) => ({ uuid: h.id, isMaster, field: `${isMaster ? "masters" : "workers"}[${i}]` }));
    const { mark } = await planAttach(tx, k, ctx.op.projectId, ctx.op.targetId, entries);
    await tx.update(clusters).set(mark).where(eq(clusters.id, ctx.op.targetId));
  });
}

const attachMastersStep = (k: Keelson): OperationStep => ({
  name: "aws-attach-masters",
  run: async (ctx) => {
    const masterIds = deployState(ctx).masterIds ?? [];
    const hosts = await awaitHosts(k, ctx, "the master instances", (live) => {
      const byInstance = new Map(live.map((h) => [h.cloudInstanceId, h]));
      const found = masterIds.map((id) => byInstance.get(id));
      return found.every((h) => h) ? (found as HostRow[]) : undefined;
    });
    await attach(k, ctx, hosts, true);
    await ctx.saveProgress({ masters: hosts.map((h) => h.id) });
  },
});

const attachWorkersStep = (k: Keelson): OperationStep => ({
  name: "aws-attach-workers",
  run: async (ctx) => {
    const cluster = await clusterRow(ctx.db, ctx.op.targetId);
    const masters = new Set(stringList(ctx.progress.masters));
    const { DesiredCapacity } = workerSizes(awsDeploySpec(cluster.spec, ""));
    const target = await targetOf(k, cluster);
    let group = new Set<string>();
    const hosts = await awaitHosts(k, ctx, `the ${DesiredCapacity} worker instances`, async (live) => {
      // The pool is the account's: only the instances of this cluster's group are its workers.
      if (live.some((h) => !masters.has(h.id) && !group.has(h.cloudInstanceId ?? ""))) {
        group = new Set(await groupInstanceIds(target, workerGroupName(ctx.op.targetId)));
      }
      const workers = live.filter((h) => !masters.has(h.id) && group.has(h.cloudInstanceId ?? ""));
      return workers.length >= DesiredCapacity ? workers.slice(0, DesiredCapacity) : undefined;
    });
    await attach(k, ctx, hosts, false);
    await ctx.saveProgress({ workers: hosts.map((h) => h.id) });
  },
});

async function groupInstanceIds(target: DeployTarget, groupName: string): Promise<string[]> {
  const found = await send<AutoScalingGroupsType>(
    target,
    "autoscaling",
    new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [groupName] }),
  );
  return (found?.AutoScalingGroups?.[0]?.Instances ?? []).map((i) => i.InstanceId as string);
}

/** The instances this cluster launched, in any state (EC2 keeps terminated ones listed for a while). */
async function clusterInstanceIds(target: DeployTarget): Promise<string[]> {
  const found = await send<DescribeInstancesResult>(
    target,
    "ec2",
    new DescribeInstancesCommand({ Filters: clusterFilter(target) }),
  );
  return (found?.Reservations ?? []).flatMap((r) => r.Instances ?? []).map((i) => i.InstanceId as string);
}

/** Terminated instances' hosts never come back: their rows and agent links go. */
async function forgetHosts(k: Keelson, ctx: StepContext, instances: string[], why: string): Promise<void> {
  if (instances.length === 0) return;
  const gone = await ctx.db
    .delete(nodes)
    .where(and(eq(nodes.projectId, ctx.op.projectId), inArray(nodes.cloudInstanceId, instances)))
    .returning({ id: nodes.id });
  for (const { id } of gone) k.agents.revoke(id, `its instance was terminated ${why}`);
}

/**
 * Update of the worker counts (numWorkers, or the autoscaler's bounds): the group takes the
 * stored spec's sizes; the hosts of instances the group terminated are forgotten; new instances'
 * hosts are attached and joined as at create. The join token of the create is the cluster's
 * (it lives a week); a resize after that needs the token renewed (not built yet).
 */
export const resizeSteps = (k: Keelson): OperationStep[] => [
  {
    name: "aws-resize-group",
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      await resizeWorkers(await targetOf(k, cluster), awsDeploySpec(cluster.spec, ""));
    },
  },
  {
    name: "aws-forget-removed",
    run: async (ctx) => {
      const cluster = await clusterRow(ctx.db, ctx.op.targetId);
      const group = new Set(await groupInstanceIds(await targetOf(k, cluster), workerGroupName(cluster.id)));
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

function deleteSteps(k: Keelson): OperationStep[] {
  return [
    {
      // Before anything is terminated: which hosts are this cluster's instances.
      name: "aws-find-hosts",
      run: async (ctx) => {
        if (Array.isArray(ctx.progress.instances)) return;
        const cluster = await clusterRow(ctx.db, ctx.op.targetId);
        await ctx.saveProgress({ instances: await clusterInstanceIds(await targetOf(k, cluster)) });
      },
    },
    { name: "release-nodes", run: (ctx) => releaseNodes(k, ctx) },
    {
      name: "aws-teardown",
      run: async (ctx) => {
        const cluster = await clusterRow(ctx.db, ctx.op.targetId);
        const spec = awsDeploySpec(cluster.spec, "");
        await teardownAll(await targetOf(k, cluster), {
          ...(spec.dns ? { dns: spec.dns } : {}),
          deadline: Date.now() + k.settings.nodeLeaveTimeoutMs,
        });
      },
    },
    {
      // The terminated instances' hosts will never come back; their rows and links go.
      name: "aws-forget-hosts",
      run: (ctx) => forgetHosts(k, ctx, stringList(ctx.progress.instances), "with its cluster"),
    },
    { name: "remove", run: removeCluster },
  ];
}

/** The steps of each auto-deploy kind (aws-kinds.ts registers the kinds without loading this module). */
export function awsSteps(k: Keelson, kind: string): OperationStep[] {
  switch (kind) {
    case CLUSTER_OPS.awsCreate:
      return [
        tokenStep(k),
        ...cloudSteps(k),
        attachMastersStep(k),
        joinMastersStep(k, (ctx) => stringList(ctx.progress.masters)),
        attachWorkersStep(k),
        joinWorkersStep(k, (ctx) => stringList(ctx.progress.workers)),
        { name: "settle", run: (ctx: StepContext) => settleClusterTask(k, ctx) },
      ];
    case CLUSTER_OPS.awsDelete:
      return deleteSteps(k);
    case CLUSTER_OPS.awsResize:
      return resizeSteps(k);
    default:
      throw new Error(`not an auto-deploy kind: ${kind}`);
  }
}
