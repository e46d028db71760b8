import { setTimeout as sleep } from "node:timers/promises";
import { clusters, lockRows, nodes } from "@keelson/db";
import { and, eq, isNotNull } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { OperationInterrupted, type OperationStep, type StepContext } from "../../../runner/types.ts";
import { workerSizes } from "../../cloud-providers/aws/deploy/create.ts";
import { describeWorkerGroup } from "../../cloud-providers/aws/deploy/worker-group.ts";
import { planAttach } from "../membership/attach.ts";
import { deadlineIn } from "../membership/membership.ts";
import { stringList } from "../operations.ts";
import { clusterRow, deployState, targetOf } from "./aws-context.ts";
import { awsDeploySpec } from "./aws-spec.ts";

/**
 * The instances' hosts joining the cluster: an instance boots, installs the agent, registers in
 * the account's node pool with its instance id and links, in its own time; these steps wait for
 * the hosts of the cluster's instances and attach them through manual deploy's attach rules
 * (masters first), for a create and for a resize alike.
 */
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
 * id and a live link.
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

export const attachMastersStep = (k: Keelson): OperationStep => ({
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

export const attachWorkersStep = (k: Keelson): OperationStep => ({
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
        group = new Set((await describeWorkerGroup(target))?.instances ?? []);
      }
      const workers = live.filter((h) => !masters.has(h.id) && group.has(h.cloudInstanceId ?? ""));
      return workers.length >= DesiredCapacity ? workers.slice(0, DesiredCapacity) : undefined;
    });
    await attach(k, ctx, hosts, false);
    await ctx.saveProgress({ workers: hosts.map((h) => h.id) });
  },
});
