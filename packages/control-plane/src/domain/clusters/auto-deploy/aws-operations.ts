import { DescribeInstancesCommand, type DescribeInstancesResult } from "@aws-sdk/client-ec2";
import type { Keelson } from "../../../context.ts";
import type { OperationStep, StepContext } from "../../../runner/types.ts";
import { DEPLOY_STEPS } from "../../cloud-providers/aws/deploy/create.ts";
import { clusterFilter, type DeployTarget, send } from "../../cloud-providers/aws/deploy/target.ts";
import { teardownAll } from "../../cloud-providers/aws/deploy/teardown.ts";
import { settleClusterTask } from "../health/settle.ts";
import {
  CLUSTER_OPS,
  joinMastersStep,
  joinWorkersStep,
  releaseNodes,
  removeCluster,
  stringList,
} from "../operations.ts";
import type { ClusterRow } from "../views.ts";
import { clusterRow, deployState, forgetHosts, targetOf } from "./aws-context.ts";
import { attachMastersStep, attachWorkersStep } from "./aws-hosts.ts";
import { resizeSteps } from "./aws-resize.ts";
import { awsDeploySpec } from "./aws-spec.ts";
import { type AwsCreateParams, hostUserData, mintInstanceToken } from "./aws-token.ts";

/**
 * Auto deploy on AWS as operations (DESIGN.md "Operations"). Create: the cluster's instance
 * join token, the seven cloud steps of aws/deploy/create.ts as cursor steps (each finds what an
 * earlier run made, so a step cut off by a crash runs again without duplicating anything), then
 * the instances' hosts attached as their agents register (masters first, through the attach path
 * of manual deploy) and joined, and the task settles as any create does. Progress carries across
 * the steps: the ids the cloud steps return, the token (encrypted), the attached hosts.
 * Delete: the hosts leave, every tagged resource is torn down, the hosts' rows and the token go.
 * Resize: aws-resize.ts.
 */
/** The token lives KEELSON_AWS_JOIN_TOKEN_MINUTES (aws-token.ts renews it): hosts the group launches later need it. */
const tokenStep = (k: Keelson): OperationStep => ({
  name: "aws-join-token",
  run: async (ctx) => {
    if (typeof ctx.progress.joinTokenEnc === "string") return;
    const issued = await mintInstanceToken(k, ctx.db, { id: ctx.op.targetId, projectId: ctx.op.projectId });
    await ctx.saveProgress({ joinTokenEnc: k.cipher.encrypt(issued.token) });
  },
});

function userDataOf(k: Keelson, ctx: StepContext, cluster: ClusterRow): string {
  const { controlPlane } = ctx.op.params as unknown as AwsCreateParams;
  return hostUserData(k, controlPlane, k.cipher.decrypt(ctx.progress.joinTokenEnc as string), cluster);
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

/** The instances this cluster launched, in any state (EC2 keeps terminated ones listed for a while). */
async function clusterInstanceIds(target: DeployTarget): Promise<string[]> {
  const found = await send<DescribeInstancesResult>(
    target,
    "ec2",
    new DescribeInstancesCommand({ Filters: clusterFilter(target) }),
  );
  return (found?.Reservations ?? []).flatMap((r) => r.Instances ?? []).map((i) => i.InstanceId as string);
}

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
