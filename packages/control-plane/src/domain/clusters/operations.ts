import { clusters } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { settleAll } from "../../runner/settle-all.ts";
import type { OperationKind, OperationRow, OperationStep, StepContext } from "../../runner/types.ts";
import { revokeClusterJoinTokens } from "../identity/join-tokens.ts";
import { currentClusterStatus, recordTaskFailure, settleClusterTask } from "./health/settle.ts";
import { attachedNodeIds, deadlineIn, joinNode, leaveNode, workerJoin } from "./membership/membership.ts";
import { pushSettings } from "./membership/push-settings.ts";
import { sweepCoalescer, sweepNow } from "./membership/sweep.ts";

export const CLUSTER_OPS = {
  create: "cluster.create",
  update: "cluster.update",
  delete: "cluster.delete",
  attach: "cluster.attach",
  detach: "cluster.detach",
  /** Auto deploy on AWS (auto-deploy/aws-operations.ts). */
  awsCreate: "cluster.aws-create",
  awsDelete: "cluster.aws-delete",
  /** An update of an auto-deployed cluster's worker counts: the group resizes, workers follow. */
  awsResize: "cluster.aws-resize",
} as const;

/** A failed cluster task leaves the cluster's own status alone and records the task's error. */
const recordFailure = (ctx: StepContext, error: Error) => recordTaskFailure(ctx, error);

/**
 * A failed membership task also settles the cluster's status from its nodes: `creating` was
 * the task's doing and must not outlive it (a failed first master reads `error`, none `pending`).
 */
export const recordMembershipFailure =
  (k: Keelson) =>
  async (ctx: StepContext, error: Error): Promise<void> => {
    await recordTaskFailure(ctx, error, { status: await currentClusterStatus(k, ctx.db, ctx.op.targetId) });
  };

export function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/** The nodes an attach (`masters`/`workers`) or a create (`masterNodes`/`workerNodes`) brings in. */
function joiningNodes(op: OperationRow): { masters: string[]; workers: string[] } {
  const p = op.params as Record<string, unknown>;
  return {
    masters: stringList(p.masters ?? p.masterNodes),
    workers: stringList(p.workers ?? p.workerNodes),
  };
}

function joinedSoFar(ctx: StepContext): Set<string> {
  return new Set(stringList(ctx.progress.joined));
}

/**
 * Masters join one at a time, each only after the one before is ok (an etcd member is added
 * to a running cluster one by one). Progress names the masters that converged, so a resumed
 * operation does not join them again.
 */
export function joinMastersStep(k: Keelson, mastersOf: (ctx: StepContext) => string[]): OperationStep {
  return {
    name: "join-masters",
    run: async (ctx) => {
      const joined = joinedSoFar(ctx);
      for (const id of mastersOf(ctx)) {
        if (joined.has(id)) continue;
        await joinNode(k, ctx, ctx.op.targetId, id, deadlineIn(k.settings.nodeConvergeTimeoutMs, ctx));
        joined.add(id);
        await ctx.saveProgress({ joined: [...joined] });
      }
    },
  };
}

/** Saves a growing list at most every `everyMs` (a thousand workers are not a thousand cursor writes). */
function throttledProgress(ctx: StepContext, key: string, initial: Set<string>, everyMs = 250) {
  const ids = new Set(initial);
  let last = 0;
  let dirty = false;
  // Saves in between run in the background, in order; flush waits for all of them.
  let saving: Promise<void> = Promise.resolve();
  const save = () => {
    if (!dirty) return;
    dirty = false;
    last = Date.now();
    saving = ctx.saveProgress({ [key]: [...ids] });
  };
  return {
    add(id: string) {
      ids.add(id);
      dirty = true;
      if (Date.now() - last >= everyMs) save();
    },
    async flush() {
      save();
      await saving;
    },
  };
}

/** Workers join together, under one deadline, once the masters of the request are ok. */
export function joinWorkersStep(k: Keelson, workersOf: (ctx: StepContext) => string[]): OperationStep {
  return {
    name: "join-workers",
    run: async (ctx) => {
      const joined = joinedSoFar(ctx);
      const progress = throttledProgress(ctx, "joined", joined);
      const deadline = deadlineIn(k.settings.nodeConvergeTimeoutMs, ctx);
      const todo = workersOf(ctx).filter((id) => !joined.has(id));
      if (todo.length === 0) return;
      const sweeps = sweepCoalescer(() => sweepNow(k, ctx.db, ctx.op.targetId, ctx.log));
      const shared = { ...(await workerJoin(k, ctx.db, ctx.op.targetId)), onWaitingForLabel: sweeps.request };
      try {
        await settleAll(
          "workers did not join",
          todo.length,
          todo.map(async (id) => {
            if (await joinNode(k, ctx, ctx.op.targetId, id, deadline, shared)) progress.add(id);
          }),
        );
      } finally {
        await progress.flush();
        await sweeps.idle();
      }
    },
  };
}

/**
 * Workers leave together, then masters one at a time (each an etcd member removal that needs
 * the others' quorum); the last node of the cluster leaves as `lastNode`. Nodes no longer in
 * the cluster are skipped, so the step is safe to run again.
 */
export async function releaseNodes(k: Keelson, ctx: StepContext, only?: { masters: string[]; workers: string[] }) {
  const clusterId = ctx.op.targetId;
  const attached = await attachedNodeIds(ctx.db, clusterId);
  const workers = only ? only.workers : attached.filter((n) => n.isMaster === 0).map((n) => n.id);
  const masters = only ? only.masters : attached.filter((n) => n.isMaster === 1).map((n) => n.id);
  const workerDeadline = deadlineIn(k.settings.nodeLeaveTimeoutMs, ctx);
  await settleAll(
    "workers did not leave",
    workers.length,
    workers.map((id) => leaveNode(k, ctx, clusterId, id, workerDeadline)),
  );
  // The workers' kubelets marked their Nodes on the way out; a master deletes them now.
  if (workers.length > 0 && masters.length < attached.filter((n) => n.isMaster === 1).length) {
    await sweepNow(k, ctx.db, clusterId, ctx.log);
  }
  for (const id of masters) await leaveNode(k, ctx, clusterId, id, deadlineIn(k.settings.nodeLeaveTimeoutMs, ctx));
}

/** The cluster's row goes, with its instance join token (which refers to it), in one transaction. */
export async function removeCluster(ctx: StepContext): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    await revokeClusterJoinTokens(tx, ctx.op.targetId);
    await tx.delete(clusters).where(eq(clusters.id, ctx.op.targetId));
  });
}

export function clusterOperationKinds(k: Keelson): OperationKind[] {
  // Create and attach alike: the nodes the request assigned join, masters first, then the task settles.
  const joinSteps = (op: OperationRow): OperationStep[] => [
    joinMastersStep(k, () => joiningNodes(op).masters),
    joinWorkersStep(k, () => joiningNodes(op).workers),
    { name: "settle", run: (ctx) => settleClusterTask(k, ctx) },
  ];
  return [
    {
      kind: CLUSTER_OPS.create,
      // The nodes named at create were attached in the create transaction; they join here.
      steps: joinSteps,
      onFailed: recordMembershipFailure(k),
    },
    {
      kind: CLUSTER_OPS.update,
      // Connected nodes get the new settings now (what they schedule, like etcd backups,
      // follows at once); the phases use them when they next run.
      steps: () => [
        { name: "push-settings", run: (ctx) => pushSettings(k, ctx) },
        { name: "settle", run: (ctx) => settleClusterTask(k, ctx) },
      ],
      onFailed: recordFailure,
    },
    {
      kind: CLUSTER_OPS.attach,
      steps: joinSteps,
      onFailed: recordMembershipFailure(k),
    },
    {
      kind: CLUSTER_OPS.detach,
      steps: (op) => [
        { name: "leave", run: (ctx) => releaseNodes(k, ctx, joiningNodes(op)) },
        { name: "settle", run: (ctx) => settleClusterTask(k, ctx) },
      ],
      onFailed: recordMembershipFailure(k),
    },
    {
      kind: CLUSTER_OPS.delete,
      steps: () => [
        // A cluster goes only once every node left it clean.
        { name: "release-nodes", run: (ctx) => releaseNodes(k, ctx) },
        { name: "remove", run: removeCluster },
      ],
      // Not left `deleting`: that would refuse every later request, a retried delete included.
      onFailed: recordMembershipFailure(k),
    },
  ];
}
