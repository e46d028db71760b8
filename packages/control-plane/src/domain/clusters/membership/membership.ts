import { clusters, type Db, firstRow, nodes } from "@keelson/db";
import type { CommandPayload, NodeRole } from "@keelson/protocol";
import { and, eq, ne } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import type { StepContext } from "../../../runner/types.ts";
import { nodePackageRef, nodePackageRefusal } from "../../packages/node-shelf.ts";
import type { ClusterRow } from "../views.ts";
import { buildJoinPayload } from "./join-payload.ts";
import {
  type Deadline,
  NodeDeadlineError,
  type ObservedNode,
  sendWhenOnline,
  stepCommand,
  type Verdict,
  waitForNode,
} from "./node-link.ts";
import { waitsForRoleLabel } from "./sweep.ts";

/**
 * Joining nodes to a cluster and taking them out, one node at a time, as operation steps use
 * them (../operations.ts). Each function is idempotent: after a restart it may run again for a
 * node it already handled and finds nothing left to do.
 */

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
}

export function deadlineIn(ms: number, ctx: StepContext): Deadline {
  return { at: Date.now() + ms, signal: ctx.signal };
}

interface NodeInfo {
  id: string;
  name: string;
  clusterId: string | null;
  isMaster: number;
}

async function nodeInfo(db: Db, nodeId: string): Promise<NodeInfo | undefined> {
  return firstRow(
    await db
      .select({ id: nodes.id, name: nodes.name, clusterId: nodes.clusterId, isMaster: nodes.isMaster })
      .from(nodes)
      .where(eq(nodes.id, nodeId)),
  );
}

function describe(node: { id: string; name: string }): string {
  return `node ${node.name} (${node.id})`;
}

/** A node's row as joins, leaves and rollouts watch it. */
export async function observe(db: Db, nodeId: string): Promise<ObservedNode | undefined> {
  const row = firstRow(
    await db
      .select({
        clusterId: nodes.clusterId,
        status: nodes.status,
        apiResponding: nodes.apiResponding,
        phases: nodes.phases,
      })
      .from(nodes)
      .where(eq(nodes.id, nodeId)),
  );
  if (!row) return undefined;
  return {
    clusterId: row.clusterId,
    status: row.status,
    apiResponding: row.apiResponding === 1,
    phases: Array.isArray(row.phases) ? row.phases : [],
  };
}

interface PhaseLike {
  id?: unknown;
  name?: unknown;
  state?: unknown;
  lastError?: unknown;
}

/** "phase "Start etcd" (start-etcd): <error>" for the first failed phase, if any. */
function failedPhase(phases: unknown[]): string | undefined {
  const failed = (phases as PhaseLike[]).find((p) => p && p.state === "failed");
  if (!failed) return undefined;
  const error = typeof failed.lastError === "string" && failed.lastError !== "" ? failed.lastError : "no error given";
  return `phase "${String(failed.name)}" (${String(failed.id)}): ${error}`;
}

/** Where a node is in its phases, for a timeout message. */
function progressOf(node: ObservedNode | undefined): string {
  if (!node) return "the node is gone";
  const failed = failedPhase(node.phases);
  if (failed) return `status ${node.status}; failing ${failed}`;
  const current = (node.phases as PhaseLike[]).find((p) => p && p.state !== "running" && p.state !== "not-started");
  const pending = (node.phases as PhaseLike[]).find((p) => p && p.state === "not-started" && p.id !== "drain-pods");
  const at = current ?? pending;
  const api = node.apiResponding ? "" : "; API server not responding";
  return `status ${node.status}${at ? `; at phase ${String(at.id)} (${String(at.state)})` : ""}${api}`;
}

export class NodeFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NodeFailedError";
  }
}

async function readCluster(db: Db, clusterId: string): Promise<ClusterRow> {
  const row = firstRow(await db.select().from(clusters).where(eq(clusters.id, clusterId)));
  if (!row) throw new Error(`cluster ${clusterId} no longer exists`);
  return row;
}

/**
 * Sends `node.join` to one node (waiting for its agent if it is offline) and waits until it
 * reports `ok` for this cluster (a master also with its API server responding), or `failed`.
 * A node that already reports ok for the cluster (a resumed operation) is not joined again.
 * Returns false when the node is no longer attached to the cluster (nothing to do).
 */
export async function joinNode(
  k: Keelson,
  ctx: StepContext,
  clusterId: string,
  nodeId: string,
  deadline: Deadline,
  /** Workers of one batch get the same payload: build it once (see workerJoin). */
  shared?: WorkerJoin,
): Promise<boolean> {
  const info = await nodeInfo(ctx.db, nodeId);
  if (!info || info.clusterId !== clusterId) {
    ctx.log.warn({ nodeId, clusterId }, "node no longer attached to the cluster; not joining it");
    return false;
  }
  const role: NodeRole = info.isMaster === 1 ? "master" : "worker";
  const label = describe(info);
  const judge = (node: ObservedNode | undefined): Verdict<true> => {
    if (!node || node.clusterId !== clusterId) {
      return { failed: new NodeFailedError(`${label} was detached from the cluster while joining`) };
    }
    if (node.status === "ok" && (role === "worker" || node.apiResponding)) return { done: true };
    if (node.status === "failed") {
      const phase = failedPhase(node.phases);
      return {
        failed: new NodeFailedError(`${label} failed${phase ? ` in ${phase}` : ": it reported status failed"}`),
      };
    }
    return undefined;
  };
  const now = judge(await observe(ctx.db, nodeId));
  const join =
    role === "worker" && shared
      ? shared
      : await (async () => {
          const cluster = await readCluster(ctx.db, clusterId);
          return {
            cluster,
            payload: await buildJoinPayload(ctx.db, cluster, { id: nodeId, role }, (v) => nodePackageRef(k, v)),
          };
        })();
  if (now && "done" in now) {
    await markJoined(ctx.db, nodeId, join.cluster.kubeRoleVersion);
    return true;
  }

  const refused = join.payload.nodePackage ? nodePackageRefusal(k.agents, nodeId, label) : undefined;
  if (refused) throw new NodeFailedError(refused);
  const result = await sendWhenOnline(
    k.agents,
    nodeId,
    "node.join",
    join.payload,
    deadline,
    label,
    stepCommand(ctx, nodeId, "node.join"),
  );
  if (!result.accepted) throw new NodeFailedError(`${label} did not accept node.join for cluster ${join.cluster.name}`);
  ctx.log.debug({ nodeId, role }, "node accepted node.join");
  // A worker waiting for its role label asks for a master's sweep rather than its next pass:
  // once each time it starts waiting (the stored row and the report may both show it).
  const askSweep = role === "worker" ? shared?.onWaitingForLabel : undefined;
  let waiting = false;
  const watch = (node: ObservedNode | undefined): Verdict<true> => {
    const now = node !== undefined && waitsForRoleLabel(node.phases);
    if (askSweep && now && !waiting) askSweep();
    waiting = now;
    return judge(node);
  };
  await waitForNode(
    k.agents,
    nodeId,
    () => observe(ctx.db, nodeId),
    watch,
    deadline,
    async () =>
      new NodeDeadlineError(
        `${label} did not converge within ${seconds(k.settings.nodeConvergeTimeoutMs)}: ${progressOf(await observe(ctx.db, nodeId))}`,
      ),
  );
  await markJoined(ctx.db, nodeId, join.cluster.kubeRoleVersion);
  return true;
}

export interface WorkerJoin {
  cluster: ClusterRow;
  payload: CommandPayload<"node.join">;
  /** Called when a worker of the batch waits for a master to give it its role label. */
  onWaitingForLabel?: () => void;
}

/**
 * The node.join every worker of a batch gets (workers list no etcd members, so it does not
 * depend on the node): read and built once, not a thousand times.
 */
export async function workerJoin(k: Keelson, db: Db, clusterId: string): Promise<WorkerJoin> {
  const cluster = await readCluster(db, clusterId);
  return {
    cluster,
    payload: await buildJoinPayload(db, cluster, { id: "", role: "worker" }, (v) => nodePackageRef(k, v)),
  };
}

/** A converged node runs the cluster's kube role version. */
async function markJoined(db: Db, nodeId: string, kubeRoleVersion: string): Promise<void> {
  await db.update(nodes).set({ actualKubeRoleVersion: kubeRoleVersion }).where(eq(nodes.id, nodeId));
}

/** Whether the cluster has a node other than `nodeId` (one indexed lookup, not a scan). */
async function hasOtherNodes(db: Db, clusterId: string, nodeId: string): Promise<boolean> {
  const other = await db
    .select({ id: nodes.id })
    .from(nodes)
    .where(and(eq(nodes.clusterId, clusterId), ne(nodes.id, nodeId)))
    .limit(1);
  return other.length > 0;
}

/** Nodes still attached to a cluster. */
export async function attachedNodeIds(db: Db, clusterId: string): Promise<{ id: string; isMaster: number }[]> {
  return await db.select({ id: nodes.id, isMaster: nodes.isMaster }).from(nodes).where(eq(nodes.clusterId, clusterId));
}

/**
 * Takes one node out of the cluster: `node.leave` (drain, stop, etcd member removal, clean;
 * `lastNode` when no other node remains), then the row goes back to unattached `ok`. A node no
 * longer in the cluster is skipped.
 */
export async function leaveNode(
  k: Keelson,
  ctx: StepContext,
  clusterId: string,
  nodeId: string,
  deadline: Deadline,
): Promise<void> {
  const info = await nodeInfo(ctx.db, nodeId);
  if (!info || info.clusterId !== clusterId) return;
  const label = describe(info);
  const result = await sendWhenOnline(
    k.agents,
    nodeId,
    "node.leave",
    { clusterId, lastNode: !(await hasOtherNodes(ctx.db, clusterId, nodeId)) },
    deadline,
    label,
    stepCommand(ctx, nodeId, "node.leave"),
  );
  if (!result.clean) throw new NodeFailedError(`${label} left the cluster but could not clean up after itself`);
  await releaseNode(ctx.db, nodeId);
}

/** Back to an unattached node: no cluster, no role, nothing running. */
export async function releaseNode(db: Db, nodeId: string): Promise<void> {
  await db
    .update(nodes)
    .set({ clusterId: null, isMaster: 0, apiResponding: 0, status: "ok", phases: [], actualKubeRoleVersion: "" })
    .where(eq(nodes.id, nodeId));
}
