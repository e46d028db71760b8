import { cloudProviders, clusters, firstRow, lockRows, nodes, type Tx } from "@keelson/db";
import { and, eq, inArray, isNull } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { ApiError, badRequest, conflict } from "../../../http/errors.ts";
import { assertNotDeleting } from "../deleting.ts";
import type { ClusterTask } from "../start-task.ts";
import type { ClusterRow } from "../views.ts";

/**
 * Attaching hosts to a manual-deploy cluster (spec §3, §4.1 attach; issue 4). The rules, each
 * a 400 that names the entry (`[2].uuid`) and the rule, checked before anything changes:
 * - every node is a node of the project (else 404) and listed once;
 * - its agent is connected (it must run the phases) and it is in no cluster;
 * - several masters in one request only while the cluster has none; afterwards one master per
 *   request, because etcd grows by one member at a time;
 * - workers only when the cluster has a master or masters come in the same request.
 * The cluster must be a manual-deploy (local provider) cluster that is not being deleted.
 */

export interface MembershipEntry {
  uuid: string;
  isMaster: boolean;
  /** How the client named this entry, for errors: `[0].uuid`, `masterNodes[1]`. */
  field: string;
}

export interface MembershipPlan {
  /** In request order: masters join one at a time in this order. */
  masters: string[];
  workers: string[];
}

export interface AttachCheckOptions {
  /** An unknown node: 404 (attach, the node is a resource named in the request) or 400 (create body). */
  unknownNode: 404 | 400;
  /** Masters the cluster already has (0 for a cluster being created). */
  existingMasters: number;
}

/** The requested node ids; a node named twice in one request is a mistake the client should hear about. */
export function uniqueNodeIds(entries: MembershipEntry[]): string[] {
  const seen = new Set<string>();
  for (const entry of entries) {
    if (seen.has(entry.uuid)) {
      throw badRequest(entry.field, `node ${entry.uuid} is listed more than once`, "duplicate_node");
    }
    seen.add(entry.uuid);
  }
  return [...seen];
}

/** Request entries -> plan; throws the first violation. Reads only. */
export async function checkAttachEntries(
  db: Tx,
  agents: Keelson["agents"],
  projectId: string,
  entries: MembershipEntry[],
  options: AttachCheckOptions,
): Promise<MembershipPlan> {
  const ids = uniqueNodeIds(entries);
  const rows = new Map(
    (entries.length === 0
      ? []
      : await db
          .select({
            id: nodes.id,
            name: nodes.name,
            clusterId: nodes.clusterId,
            agentConnected: nodes.agentConnected,
            clusterName: clusters.name,
          })
          .from(nodes)
          .leftJoin(clusters, eq(clusters.id, nodes.clusterId))
          .where(and(eq(nodes.projectId, projectId), inArray(nodes.id, ids)))
    ).map((r) => [r.id, r]),
  );

  const masters: string[] = [];
  const workers: string[] = [];
  for (const entry of entries) {
    const row = rows.get(entry.uuid);
    if (!row) {
      const message = `node ${entry.uuid} is not a node of this project`;
      if (options.unknownNode === 404) throw new ApiError(404, "not_found", message, entry.field);
      throw badRequest(entry.field, message, "unknown_node");
    }
    // The hub knows a link the batched presence write has not recorded yet; rows written by an
    // earlier process (or a test) know hosts the hub has not seen. Either means connected.
    if (!agents.isConnected(row.id) && row.agentConnected !== 1) {
      throw badRequest(
        entry.field,
        `node ${row.name} (${row.id}) is not connected: its agent has no link to the control plane, so it cannot run the node phases`,
        "node_offline",
      );
    }
    if (row.clusterId !== null) {
      throw badRequest(
        entry.field,
        `node ${row.name} (${row.id}) is already attached to cluster ${row.clusterName ?? ""} (${row.clusterId}); detach it first`,
        "node_attached",
      );
    }
    if (entry.isMaster) {
      if (options.existingMasters > 0 && masters.length >= 1) {
        throw badRequest(
          entry.field,
          `node ${row.name} (${row.id}): only one master can be attached per request once the cluster has masters ` +
            `(it has ${options.existingMasters}); etcd grows by one member at a time`,
          "one_master_at_a_time",
        );
      }
      masters.push(row.id);
    } else {
      workers.push(row.id);
    }
  }
  if (workers.length > 0 && masters.length === 0 && options.existingMasters === 0) {
    const first = entries.find((e) => !e.isMaster) as MembershipEntry;
    throw badRequest(
      first.field,
      `node ${first.uuid}: workers can be attached only once the cluster has a master, or together with masters in the same request`,
      "master_required",
    );
  }
  return { masters, workers };
}

export async function clusterProviderType(db: Tx, cluster: ClusterRow): Promise<string> {
  return (
    firstRow(
      await db
        .select({ type: cloudProviders.type })
        .from(cloudProviders)
        .where(eq(cloudProviders.id, cluster.cloudProviderId)),
    )?.type ?? ""
  );
}

/** Membership changes are for manual-deploy clusters that are not on their way out. */
export async function assertMembershipChangeable(db: Tx, cluster: ClusterRow, action: string): Promise<void> {
  const type = await clusterProviderType(db, cluster);
  if (type !== "local") {
    throw badRequest(
      "uuid",
      `cluster ${cluster.name} (${cluster.id}) is an auto-deploy cluster on ${type}: nodes can be ${action} only on manual-deploy (local provider) clusters`,
      "not_manual_deploy",
    );
  }
  await assertNotDeleting(db, cluster);
}

export async function masterCount(db: Tx, clusterId: string): Promise<{ masters: number; okMasters: number }> {
  const rows = await db
    .select({ status: nodes.status })
    .from(nodes)
    .where(and(eq(nodes.clusterId, clusterId), eq(nodes.isMaster, 1)));
  return { masters: rows.length, okMasters: rows.filter((r) => r.status === "ok").length };
}

/**
 * Puts the planned nodes into the cluster (inside the caller's transaction). They read as
 * attached and `converging` from now on; the operation makes them converge. A node another
 * request attached in between makes the whole transaction fail (nothing changes).
 */
export async function assignNodes(tx: Tx, clusterId: string, plan: MembershipPlan): Promise<void> {
  const assign = async (ids: string[], isMaster: 0 | 1) => {
    if (ids.length === 0) return;
    const changed = await tx
      .update(nodes)
      .set({ clusterId, isMaster, status: "converging", apiResponding: 0, phases: [] })
      .where(and(inArray(nodes.id, ids), isNull(nodes.clusterId)))
      .returning({ id: nodes.id });
    if (changed.length !== ids.length) {
      throw conflict("a node of the request was attached to a cluster by another request meanwhile", "node_attached");
    }
  };
  await assign(plan.masters, 1);
  await assign(plan.workers, 0);
}

/**
 * The attach's part of `changeMembership`, inside its transaction with the cluster row locked:
 * the rules checked against the rows as they are, the nodes assigned; the mark says whether
 * the cluster is (still) being created.
 */
export async function planAttach(
  tx: Tx,
  k: Keelson,
  projectId: string,
  clusterId: string,
  entries: MembershipEntry[],
): Promise<{ plan: MembershipPlan; mark: ClusterTask["mark"] }> {
  // A request attaching the same host to another cluster waits here, then its check
  // finds the host taken and answers as it would after (400 naming the entry).
  await lockRows(tx, nodes, inArray(nodes.id, [...new Set(entries.map((e) => e.uuid))]));
  const before = await masterCount(tx, clusterId);
  const plan = await checkAttachEntries(tx, k.agents, projectId, entries, {
    unknownNode: 404,
    existingMasters: before.masters,
  });
  await assignNodes(tx, clusterId, plan);
  return {
    plan,
    // Until a master is ok the cluster is still being created.
    mark: {
      ...(before.okMasters === 0 ? { status: "creating" } : {}),
      taskStatus: before.masters === 0 && plan.masters.length > 0 ? "creating" : "updating",
    },
  };
}
