import { cloudProviders, clusters, type Db, nodePools, nodes } from "@keelson/db";
import { and, asc, eq, type SQL } from "drizzle-orm";
import { notFound, notImplemented } from "../../http/errors.ts";
import type { NodeExtras, NodeRow } from "./present.ts";

/** A node row with what its records need, read in one joined query. */
export interface NodeView {
  row: NodeRow;
  extras: NodeExtras;
}

function selectViews(db: Db, where: SQL | undefined): NodeView[] {
  const rows = db
    .select({
      node: nodes,
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
    .where(where)
    .orderBy(asc(nodes.createdAt), asc(nodes.name))
    .all();
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

export function listNodeViews(db: Db, projectId: string): NodeView[] {
  return selectViews(db, eq(nodes.projectId, projectId));
}

export function getNodeView(db: Db, projectId: string, nodeId: string): NodeView {
  const view = selectViews(db, and(eq(nodes.projectId, projectId), eq(nodes.id, nodeId)))[0];
  if (!view) throw notFound("node", nodeId);
  return view;
}

/**
 * `PUT nodes/{uuid}` with `{clusterUuid: null}` (§3: only the cluster property of a node can
 * change, and only to detach). An unattached node is already there: nothing to do. Detaching
 * an attached node means running its stop phases, which come with the node phases.
 */
export function detachNode(db: Db, projectId: string, nodeId: string): void {
  const view = getNodeView(db, projectId, nodeId);
  if (view.row.clusterId !== null) {
    throw notImplemented("detaching an attached node comes with the node phases; use the cluster's detach later");
  }
}

/** Nodes attached to one cluster (for `GET /v4/{project_uuid}/clusters/{uuid}/nodes`). */
export function listClusterNodeViews(db: Db, projectId: string, clusterId: string): NodeView[] {
  return selectViews(db, and(eq(nodes.projectId, projectId), eq(nodes.clusterId, clusterId)));
}
