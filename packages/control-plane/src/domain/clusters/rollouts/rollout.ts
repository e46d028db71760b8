import { clusters, type Db, dialectOf, firstRow, inJsonArray, nodes, type Tx, writeInIdOrder } from "@keelson/db";
import { asc, eq, inArray } from "drizzle-orm";
import { latestReports } from "../../../agents/latest-reports.ts";
import type { Keelson } from "../../../context.ts";
import { conflict } from "../../../http/errors.ts";
import { settleAll } from "../../../runner/settle-all.ts";
import { activeOperationFor, unfinishedParams } from "../../../runner/store.ts";
import type { OperationKind, OperationRow, OperationStep, StepContext } from "../../../runner/types.ts";
import { nodePackageRef } from "../../packages/node-shelf.ts";
import { isHealthyNode } from "../health/health.ts";
import { currentClusterStatus, recordTaskFailure, settleClusterTask } from "../health/settle.ts";
import { deadlineIn } from "../membership/membership.ts";
import type { ClusterSpec } from "../spec/fields.ts";
import { NodeProgress } from "./node-progress.ts";
import { type NodeAction, type RolloutNode, rollNode, trackReports, waitForEtcdWhole } from "./rollout-nodes.ts";
import { prefetchStep } from "./rollout-prefetch.ts";

/**
 * Rolling restarts and upgrades of a cluster's nodes (issue 5), as operations:
 * masters one at a time (the next only once the previous is back `ok` with its API server
 * responding and reports etcd healthy with all its members), then workers in batches, each
 * batch only after the previous one is back. Progress names, per step, the nodes `started`
 * (recorded before their command is sent) and `done` (after they are back): after a
 * control-plane crash a done node is skipped and a started one gets its command again under
 * the same id, which its agent runs at most once, so every node is restarted or upgraded once. The first node that fails or does not come back
 * within KEELSON_NODE_RESTART_TIMEOUT_MS stops the rollout: no further node is touched.
 */

export const ROLLOUT_OPS = { restart: "cluster.restart", upgrade: "cluster.upgrade" } as const;

/** While one of these runs on a cluster, a restart or upgrade request is refused with 409. */
export const BUSY_KINDS = [
  ROLLOUT_OPS.restart,
  ROLLOUT_OPS.upgrade,
  "cluster.attach",
  "cluster.detach",
  "cluster.create",
  "cluster.delete",
  "cluster.aws-create",
  "cluster.aws-delete",
  "cluster.aws-resize",
];

export const DEFAULT_BATCH_PERCENT = 10;

/** Workers per batch: `percent` of them rounded down, at least 1. */
export function batchSize(workers: number, percent: number): number {
  return Math.max(1, Math.floor((workers * percent) / 100));
}

export async function assertNotBusy(db: Tx, clusterId: string): Promise<void> {
  const busy = await activeOperationFor(db, clusterId, BUSY_KINDS);
  if (busy) {
    throw conflict(
      `cluster ${clusterId} is busy with ${busy.kind} (operation ${busy.id}, ${busy.state}); try again once it finished`,
      "cluster_busy",
    );
  }
}

/** The cluster's nodes by role, in name order (the order a rollout takes them in). */
export async function clusterNodes(
  db: Tx,
  clusterId: string,
): Promise<{ masters: RolloutNode[]; workers: RolloutNode[] }> {
  const rows = await db
    .select({ id: nodes.id, name: nodes.name, isMaster: nodes.isMaster })
    .from(nodes)
    .where(eq(nodes.clusterId, clusterId))
    .orderBy(asc(nodes.name), asc(nodes.id));
  const all = rows.map((r) => ({ id: r.id, name: r.name, isMaster: r.isMaster === 1 }));
  return { masters: all.filter((n) => n.isMaster), workers: all.filter((n) => !n.isMaster) };
}

// ---- steps ------------------------------------------------------------------------------

interface RolloutPlan {
  /** The command each node gets. */
  action: (clusterId: string) => NodeAction | Promise<NodeAction>;
  /**
   * Of these nodes, the ids with nothing left to do (an upgrade resumed by a new request skips
   * those at the target): one query per step, not one per node.
   */
  skip?: (nodes: RolloutNode[]) => Promise<Set<string>>;
  /** What being back means for these nodes, written before `done` is saved (NodeProgress). */
  recordDone?: (nodeIds: string[]) => Promise<void>;
}

function nodesOf(op: OperationRow, key: string): RolloutNode[] {
  const list = (op.params as Record<string, unknown>)[key];
  return Array.isArray(list) ? (list as RolloutNode[]) : [];
}

function mastersStep(k: Keelson, name: string, masters: RolloutNode[], plan: RolloutPlan): OperationStep {
  return {
    name,
    run: async (ctx) => {
      const progress = new NodeProgress(ctx, plan.recordDone);
      const clusterId = ctx.op.targetId;
      const skipped = (await plan.skip?.(masters)) ?? new Set();
      const todo = masters.filter((m) => !progress.done.has(m.id) && !skipped.has(m.id));
      for (const [i, master] of todo.entries()) {
        const announce = announcer(ctx, i, todo.length, [master]);
        announce("started");
        const resumed = progress.started.has(master.id);
        if (!resumed) progress.start([master.id]);
        const deadline = deadlineIn(k.settings.nodeRestartTimeoutMs, ctx);
        // Only reports after this count for etcd (a resumed master: anything it told this process).
        const since = resumed ? 0 : latestReports(k.agents).mark();
        await rollNode(k, ctx, master, await plan.action(clusterId), deadline, resumed);
        // etcd must have all its members before the next master stops its own.
        await waitForEtcdWhole(k, ctx, master, (await clusterNodes(ctx.db, clusterId)).masters, since, deadline);
        progress.finish(master.id);
        await progress.flush();
        announce("done");
      }
    },
  };
}

/** Announces one batch of a step on the event stream (README "Live progress"): started, then done. */
function announcer(ctx: StepContext, index: number, of: number, group: RolloutNode[]) {
  const nodes = group.map((n) => ({ id: n.id, name: n.name }));
  return (state: "started" | "done") => ctx.announceBatch({ number: index + 1, of, nodes, state });
}

/**
 * Workers in batches: the batch a crash interrupted first (its started nodes are waited
 * for), then the others `batch` at a time (`batch` 0: all of them together).
 */
function workersStep(
  k: Keelson,
  name: string,
  workers: RolloutNode[],
  batch: (count: number) => number,
  plan: RolloutPlan,
): OperationStep {
  return {
    name,
    run: async (ctx) => {
      const progress = new NodeProgress(ctx, plan.recordDone);
      const clusterId = ctx.op.targetId;
      const skipped = (await plan.skip?.(workers)) ?? new Set();
      const todo = workers.filter((n) => !progress.done.has(n.id) && !skipped.has(n.id));
      const interrupted = todo.filter((n) => progress.started.has(n.id));
      const fresh = todo.filter((n) => !progress.started.has(n.id));
      const size = Math.max(1, batch(workers.length) || fresh.length);
      const batches: { nodes: RolloutNode[]; resumed: boolean }[] = [];
      if (interrupted.length > 0) batches.push({ nodes: interrupted, resumed: true });
      for (let i = 0; i < fresh.length; i += size) batches.push({ nodes: fresh.slice(i, i + size), resumed: false });
      const action = await plan.action(clusterId);
      try {
        for (const [i, { nodes: group, resumed }] of batches.entries()) {
          const announce = announcer(ctx, i, batches.length, group);
          announce("started");
          if (!resumed) progress.start(group.map((n) => n.id));
          const deadline = deadlineIn(k.settings.nodeRestartTimeoutMs, ctx);
          await settleAll(
            "nodes of the batch failed",
            group.length,
            group.map(async (node) => {
              await rollNode(k, ctx, node, action, deadline, resumed);
              progress.finish(node.id);
            }),
          );
          await progress.flush();
          announce("done");
        }
      } finally {
        await progress.flush();
      }
    },
  };
}

// ---- settling ---------------------------------------------------------------------------

/** A stopped rollout leaves the cluster usable: status from its nodes, the error on the task. */
const recordRolloutFailure =
  (k: Keelson) =>
  async (ctx: StepContext, error: Error): Promise<void> => {
    const status = await currentClusterStatus(k, ctx.db, ctx.op.targetId);
    await recordTaskFailure(ctx, error, { status, upgradingTo: null });
  };

// ---- kinds ------------------------------------------------------------------------------

export interface RestartParams {
  scope: "all" | "masters" | "workers";
  batchPercent: number;
  masters: RolloutNode[];
  workers: RolloutNode[];
}

export interface UpgradeParams {
  target: string;
  batchPercent: number;
  masters: RolloutNode[];
  /** batchUpgradeNodes: upgraded together, right after the masters. */
  chosen: RolloutNode[];
  workers: RolloutNode[];
  /** Spec fields the upgrade changes. */
  changes: UpgradeChanges;
}

function percentOf(op: OperationRow): number {
  const value = Number((op.params as Record<string, unknown>).batchPercent);
  return Number.isFinite(value) && value >= 1 && value <= 100 ? value : DEFAULT_BATCH_PERCENT;
}

export type UpgradeChanges = Partial<Pick<ClusterSpec, "containerRuntime" | "addonOperatorImageTag" | "addonVersions">>;

async function upgradedSpec(db: Db, clusterId: string, changes: UpgradeChanges): Promise<ClusterSpec | undefined> {
  const row = firstRow(await db.select({ spec: clusters.spec }).from(clusters).where(eq(clusters.id, clusterId)));
  return row && { ...row.spec, ...changes };
}

export function rolloutOperationKinds(k: Keelson): OperationKind[] {
  // Resumed rollouts must tell reports to this process from rows the previous one left.
  trackReports(k.agents);
  const restart: RolloutPlan = {
    action: (clusterId) => ({ name: "node.restart", payload: { clusterId, regenerateCerts: false } }),
  };
  return [
    {
      kind: ROLLOUT_OPS.restart,
      steps: (op) => [
        mastersStep(k, "restart-masters", nodesOf(op, "masters"), restart),
        workersStep(k, "restart-workers", nodesOf(op, "workers"), (n) => batchSize(n, percentOf(op)), restart),
        { name: "settle", run: (ctx) => settleClusterTask(k, ctx) },
      ],
      onFailed: recordRolloutFailure(k),
    },
    {
      kind: ROLLOUT_OPS.upgrade,
      steps: (op) => {
        const params = op.params as unknown as UpgradeParams;
        const target = params.target;
        const atTarget = async (list: RolloutNode[]) => {
          if (list.length === 0) return new Set<string>();
          const rows = await k.db
            .select({ id: nodes.id, version: nodes.actualKubeRoleVersion })
            .from(nodes)
            .where(
              inArray(
                nodes.id,
                list.map((n) => n.id),
              ),
            );
          return new Set(rows.filter((r) => r.version === target).map((r) => r.id));
        };
        // Looked up when the step runs: a package uploaded after an upgrade failed is used by its resume.
        const nodePackageOf = async (version: string) => {
          const nodePackage = await nodePackageRef(k, version);
          return nodePackage ? { nodePackage } : {};
        };
        const plan: RolloutPlan = {
          // Settings are read when the step runs: the node gets the spec as it will be after the upgrade.
          action: async (clusterId) => ({
            name: "node.upgrade",
            payload: {
              clusterId,
              kubeRoleVersion: target,
              settings: { ...(await upgradedSpec(k.db, clusterId, params.changes ?? {})) },
              ...(await nodePackageOf(target)),
            },
          }),
          skip: atTarget,
          recordDone: async (nodeIds) => {
            // One statement text for any number of nodes (inJsonArray): compiled once, not per
            // save; the rows locked in id order first, as every writer of several hosts does.
            await writeInIdOrder(k.db, nodes, nodeIds, (tx) =>
              tx
                .update(nodes)
                .set({ actualKubeRoleVersion: target })
                .where(inJsonArray(dialectOf(tx), nodes.id, nodeIds)),
            );
          },
        };
        const everyNode = () => [...nodesOf(op, "masters"), ...nodesOf(op, "chosen"), ...nodesOf(op, "workers")];
        return [
          prefetchStep(k, target, everyNode, atTarget),
          mastersStep(k, "upgrade-masters", nodesOf(op, "masters"), plan),
          workersStep(k, "upgrade-chosen-workers", nodesOf(op, "chosen"), () => 0, plan),
          // Batches are a percent of all the cluster's workers, the chosen ones included.
          workersStep(
            k,
            "upgrade-workers",
            nodesOf(op, "workers"),
            (n) => batchSize(n + nodesOf(op, "chosen").length, percentOf(op)),
            plan,
          ),
          {
            name: "finish",
            run: async (ctx) =>
              settleClusterTask(k, ctx, {
                kubeRoleVersion: target,
                upgradingTo: null,
                spec: await upgradedSpec(ctx.db, ctx.op.targetId, params.changes ?? {}),
              }),
          },
        ];
      },
      onFailed: recordRolloutFailure(k),
    },
  ];
}

// ---- rolling restarts in progress ------------------------------------------------------

/** `GET /v3/{project}/currentRollingRestarts`: the nodes of every unfinished restart, up or not. */
export async function currentRollingRestarts(
  db: Db,
  projectId: string,
): Promise<{ name: string; runState: boolean }[]> {
  const nodeIds: string[] = [];
  for (const params of await unfinishedParams(db, ROLLOUT_OPS.restart, { projectId })) {
    const p = params as Partial<RestartParams>;
    for (const n of [...(p.masters ?? []), ...(p.workers ?? [])]) nodeIds.push(n.id);
  }
  if (nodeIds.length === 0) return [];
  const rows = new Map(
    (
      await db
        .select({
          id: nodes.id,
          isMaster: nodes.isMaster,
          status: nodes.status,
          agentConnected: nodes.agentConnected,
          apiResponding: nodes.apiResponding,
        })
        .from(nodes)
        .where(inArray(nodes.id, nodeIds))
    ).map((r) => [r.id, r]),
  );
  return nodeIds.map((id) => {
    const row = rows.get(id);
    return { name: id, runState: row !== undefined && isHealthyNode(row) };
  });
}
