import { nodes, type Tx } from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import { ApiError, badRequest, conflict } from "../../../http/errors.ts";
import { unfinishedParams } from "../../../runner/store.ts";
import { isHealthyNode } from "../health/health.ts";
import { CLUSTER_OPS } from "../operations.ts";
import { type MembershipEntry, type MembershipPlan, uniqueNodeIds } from "./attach.ts";

/**
 * Detaching nodes from a manual-deploy cluster (spec §3, §4.1 detach, §4.3 PUT node). Each
 * entry must name a node of the project (else 404), once, attached to this very cluster in the
 * role the entry says (else 400 naming it), and not already being detached (409).
 *
 * etcd quorum (409 `quorum_loss` when broken), with M the cluster's masters (those an earlier
 * detach is already taking out do not count), R the masters of this request and W the workers
 * left afterwards:
 * - detaching every node of the cluster is always allowed (the last node goes without a
 *   member removal);
 * - otherwise, when R is not empty: M \ R must not be empty while workers remain (they need a
 *   master); the masters now must have a healthy majority (removing a member is an etcd write,
 *   which needs quorum); and the masters left, M \ R, must still have a healthy majority of
 *   their own number. Masters leave one at a time, so each intermediate membership keeps
 *   that majority too.
 * - workers alone never touch etcd: always allowed.
 * "Healthy" is the health of §2.1 (status ok, agent connected, API server responding).
 */

interface MemberRow {
  id: string;
  name: string;
  isMaster: number;
  status: string;
  agentConnected: number;
  apiResponding: number;
}

/** Nodes that pending detach operations of this cluster are already taking out. */
async function leavingNodes(db: Tx, clusterId: string): Promise<Set<string>> {
  const ids = new Set<string>();
  for (const params of await unfinishedParams(db, CLUSTER_OPS.detach, { targetId: clusterId })) {
    for (const key of ["masters", "workers"]) {
      const list = (params as Record<string, unknown>)[key];
      if (Array.isArray(list)) for (const id of list) if (typeof id === "string") ids.add(id);
    }
  }
  return ids;
}

/** Request entries -> plan; throws the first violation. Reads only. */
export async function checkDetachEntries(
  db: Tx,
  projectId: string,
  clusterId: string,
  entries: MembershipEntry[],
): Promise<MembershipPlan> {
  const ids = uniqueNodeIds(entries);
  const requested = new Map(
    (
      await db
        .select({ id: nodes.id, name: nodes.name, clusterId: nodes.clusterId, isMaster: nodes.isMaster })
        .from(nodes)
        .where(and(eq(nodes.projectId, projectId), inArray(nodes.id, ids)))
    ).map((r) => [r.id, r]),
  );
  const leaving = await leavingNodes(db, clusterId);
  const plan: MembershipPlan = { masters: [], workers: [] };
  for (const entry of entries) {
    const row = requested.get(entry.uuid);
    if (!row) {
      throw new ApiError(404, "not_found", `node ${entry.uuid} is not a node of this project`, entry.field);
    }
    const label = `node ${row.name} (${row.id})`;
    if (row.clusterId !== clusterId) {
      throw badRequest(
        entry.field,
        `${label} is not attached to this cluster${row.clusterId ? ` (it is in cluster ${row.clusterId})` : ""}`,
        "not_in_cluster",
      );
    }
    if ((row.isMaster === 1) !== entry.isMaster) {
      throw badRequest(
        entry.field,
        `${label} is a ${row.isMaster === 1 ? "master" : "worker"} of this cluster, not a ${entry.isMaster ? "master" : "worker"}: isMaster must say its role`,
        "role_mismatch",
      );
    }
    if (leaving.has(row.id)) throw conflict(`${label} is already being detached`, "already_detaching");
    (entry.isMaster ? plan.masters : plan.workers).push(row.id);
  }

  const members = (
    await db
      .select({
        id: nodes.id,
        name: nodes.name,
        isMaster: nodes.isMaster,
        status: nodes.status,
        agentConnected: nodes.agentConnected,
        apiResponding: nodes.apiResponding,
      })
      .from(nodes)
      .where(eq(nodes.clusterId, clusterId))
  ).filter((m) => !leaving.has(m.id));
  checkQuorum(members, plan);
  return plan;
}

/** The etcd rule of this module's comment; throws 409 quorum_loss. */
export function checkQuorum(members: MemberRow[], plan: MembershipPlan): void {
  const removing = new Set([...plan.masters, ...plan.workers]);
  const remaining = members.filter((m) => !removing.has(m.id));
  if (remaining.length === 0 || plan.masters.length === 0) return;
  const masters = members.filter((m) => m.isMaster === 1);
  const mastersLeft = remaining.filter((m) => m.isMaster === 1);
  const names = members
    .filter((m) => plan.masters.includes(m.id))
    .map((m) => `${m.name} (${m.id})`)
    .join(", ");
  if (mastersLeft.length === 0) {
    throw conflict(
      `detaching master(s) ${names} would leave ${remaining.length} worker(s) without a master: detach the workers in the same request, or first`,
      "quorum_loss",
    );
  }
  const healthyNow = masters.filter(isHealthyNode).length;
  if (healthyNow <= masters.length / 2) {
    throw conflict(
      `etcd has no quorum now (${healthyNow} of ${masters.length} masters healthy), so no member can be removed; detach every node of the cluster, or make the masters healthy first`,
      "quorum_loss",
    );
  }
  const healthyLeft = mastersLeft.filter(isHealthyNode).length;
  if (healthyLeft <= mastersLeft.length / 2) {
    throw conflict(
      `detaching master(s) ${names} would lose etcd quorum: ${healthyLeft} of the ${mastersLeft.length} remaining masters are healthy, a majority is needed`,
      "quorum_loss",
    );
  }
}
