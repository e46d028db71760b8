import { cloudProviders, clusters, type Db, nodePools, nodes } from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import type { Catalogue } from "../../catalogue/catalogue.ts";
import { notFound } from "../../http/errors.ts";
import { countRoles, masterHealth, type RoleCounts, workerHealth } from "./health.ts";
import type { ClusterView } from "./presenters.ts";

export type ClusterRow = typeof clusters.$inferSelect;

export function findCluster(db: Pick<Db, "select">, projectId: string, clusterId: string): ClusterRow {
  const row = db
    .select()
    .from(clusters)
    .where(and(eq(clusters.id, clusterId), eq(clusters.projectId, projectId)))
    .get();
  if (!row) throw notFound("cluster", clusterId);
  return row;
}

const healthColumns = {
  clusterId: nodes.clusterId,
  isMaster: nodes.isMaster,
  status: nodes.status,
  agentConnected: nodes.agentConnected,
  apiResponding: nodes.apiResponding,
};

function roleCountsByCluster(db: Db, clusterIds: string[]): Map<string, RoleCounts> {
  const byCluster = new Map<string, RoleCounts>();
  if (clusterIds.length === 0) return byCluster;
  const rows = db.select(healthColumns).from(nodes).where(inArray(nodes.clusterId, clusterIds)).all();
  const grouped = new Map<string, typeof rows>();
  for (const row of rows) {
    const list = grouped.get(row.clusterId as string) ?? [];
    list.push(row);
    grouped.set(row.clusterId as string, list);
  }
  for (const id of clusterIds) byCluster.set(id, countRoles(grouped.get(id) ?? []));
  return byCluster;
}

export function roleCountsOf(db: Db, clusterId: string): RoleCounts {
  return roleCountsByCluster(db, [clusterId]).get(clusterId) as RoleCounts;
}

/**
 * Builds what the presenters need for a set of clusters of one project with a fixed number of
 * queries (providers, pools, node roles), whatever the number of clusters.
 */
export function buildClusterViews(db: Db, catalogue: Catalogue, rows: ClusterRow[]): ClusterView[] {
  if (rows.length === 0) return [];
  const providerIds = [...new Set(rows.map((r) => r.cloudProviderId))];
  const poolIds = [...new Set(rows.map((r) => r.nodePoolId))];
  const providers = new Map(
    db
      .select({ id: cloudProviders.id, name: cloudProviders.name, type: cloudProviders.type })
      .from(cloudProviders)
      .where(inArray(cloudProviders.id, providerIds))
      .all()
      .map((p) => [p.id, p]),
  );
  const pools = new Map(
    db
      .select({ id: nodePools.id, name: nodePools.name })
      .from(nodePools)
      .where(inArray(nodePools.id, poolIds))
      .all()
      .map((p) => [p.id, p]),
  );
  const counts = roleCountsByCluster(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((row) => {
    const provider = providers.get(row.cloudProviderId);
    const pool = pools.get(row.nodePoolId);
    const roles = counts.get(row.id) as RoleCounts;
    // Manual-deploy clusters count what is attached, not what was asked for at create.
    const spec =
      provider?.type === "local" ? { ...row.spec, numMasters: roles.masters, numWorkers: roles.workers } : row.spec;
    return {
      row: { ...row, spec },
      cloudProvider: { uuid: row.cloudProviderId, name: provider?.name ?? "", type: provider?.type ?? "" },
      nodePool: { uuid: row.nodePoolId, name: pool?.name ?? "" },
      masterStatus: masterHealth(roles.masters, roles.healthyMasters),
      workerStatus: workerHealth(roles.workers, roles.healthyWorkers),
      upgrade: catalogue.upgradeTargets(row.kubeRoleVersion),
      etcdVersion: catalogue.find(row.kubeRoleVersion)?.etcdVersion ?? "",
    } satisfies ClusterView;
  });
}

export function listClusterRows(db: Db, projectId: string): ClusterRow[] {
  return db.select().from(clusters).where(eq(clusters.projectId, projectId)).orderBy(clusters.createdAt).all();
}
