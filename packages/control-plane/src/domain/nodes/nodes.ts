import { cloudProviders, clusters, type Db, hostPresence, nodePools, nodes } from "@keelson/db";
import { and, eq, type SQL } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { badRequest, notFound } from "../../http/errors.ts";
import { keysetPage, type PageRequest } from "../../http/paging.ts";
import { changeMembership } from "../clusters/membership/change.ts";
import { PRESENCE_OF_NODE } from "../hosts/last-seen.ts";
import { afterNode, NODE_LIST_ORDER, nodeMarkerOf } from "./list-order.ts";
import { NODE_RECORD_COLUMNS, type NodeExtras, type NodeRow } from "./present.ts";

/** A node row with what its records need, read in one joined query. */
export interface NodeView {
  row: NodeRow;
  extras: NodeExtras;
}

async function selectViews(db: Db, where: SQL | undefined, limit?: number): Promise<NodeView[]> {
  const query = db
    .select({
      node: NODE_RECORD_COLUMNS,
      poolName: nodePools.name,
      providerId: cloudProviders.id,
      providerType: cloudProviders.type,
      clusterName: clusters.name,
      clusterKube: clusters.kubeRoleVersion,
      clusterSpec: clusters.spec,
    })
    .from(nodes)
    .innerJoin(nodePools, eq(nodePools.id, nodes.nodePoolId))
    .innerJoin(cloudProviders, eq(cloudProviders.id, nodePools.cloudProviderId))
    .leftJoin(clusters, eq(clusters.id, nodes.clusterId))
    .leftJoin(hostPresence, PRESENCE_OF_NODE)
    .where(where)
    .orderBy(...NODE_LIST_ORDER);
  const rows = await (limit === undefined ? query : query.limit(limit));
  return rows.map((r) => ({
    row: r.node,
    extras: {
      nodePool: { uuid: r.node.nodePoolId, name: r.poolName },
      cloudProvider: { uuid: r.providerId, type: r.providerType },
      cluster:
        r.node.clusterId && r.clusterName !== null
          ? {
              uuid: r.node.clusterId,
              name: r.clusterName,
              kubeRoleVersion: r.clusterKube ?? "",
              masterless: r.clusterSpec?.masterless === true,
            }
          : null,
    },
  }));
}

export async function listNodeViews(db: Db, projectId: string): Promise<NodeView[]> {
  return selectViews(db, eq(nodes.projectId, projectId));
}

/** A page of that list: `limit` nodes after `after` (from the first without), and the marker of the next. */
export async function listNodeViewsPage(
  db: Db,
  projectId: string,
  page: PageRequest,
): Promise<{ items: NodeView[]; next?: string }> {
  const where = await afterNode(db, eq(nodes.projectId, projectId), page.after);
  // One row more than the page: whether there is a next page, without counting.
  return keysetPage(await selectViews(db, where, page.limit + 1), (v) => nodeMarkerOf(v.row), page.limit);
}

export async function getNodeView(db: Db, projectId: string, nodeId: string): Promise<NodeView> {
  const view = (await selectViews(db, and(eq(nodes.projectId, projectId), eq(nodes.id, nodeId))))[0];
  if (!view) throw notFound("node", nodeId);
  return view;
}

const ONLY_CLUSTER =
  'only the node\'s cluster can be changed, and only cleared: send {"clusterUuid": null} to detach it';

/** The PUT body of §4.3: exactly `{clusterUuid: null}`; anything else is a 400 that says so. */
function checkNodeUpdate(body: unknown): void {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest("body", `the body must be a JSON object: ${ONLY_CLUSTER}`, "only_cluster_can_change");
  }
  const other = Object.keys(body).find((key) => key !== "clusterUuid");
  if (other !== undefined)
    throw badRequest(other, `${other} cannot be changed: ${ONLY_CLUSTER}`, "only_cluster_can_change");
  if (!("clusterUuid" in body) || (body as { clusterUuid: unknown }).clusterUuid !== null) {
    throw badRequest("clusterUuid", `clusterUuid must be null: ${ONLY_CLUSTER}`, "only_cluster_can_change");
  }
}

/**
 * `PUT nodes/{uuid}` with `{clusterUuid: null}` (§3: only the cluster property of a node can
 * change, and only to detach). An unattached node is already there: nothing to do. An attached
 * one is detached from its cluster like `POST .../detach` would, by the same rules (quorum).
 */
export async function updateNode(k: Keelson, projectId: string, nodeId: string, body: unknown): Promise<void> {
  checkNodeUpdate(body);
  const view = await getNodeView(k.db, projectId, nodeId);
  const clusterId = view.row.clusterId;
  if (clusterId === null) return;
  await changeMembership(k, "detach", projectId, clusterId, [
    { uuid: nodeId, isMaster: view.row.isMaster === 1, field: "clusterUuid" },
  ]);
}

/** Nodes attached to one cluster (for `GET /v4/{project_uuid}/clusters/{uuid}/nodes`). */
export async function listClusterNodeViews(db: Db, projectId: string, clusterId: string): Promise<NodeView[]> {
  return selectViews(db, and(eq(nodes.projectId, projectId), eq(nodes.clusterId, clusterId)));
}
