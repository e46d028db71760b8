import { cloudProviders, clusters, type Db, nodePools, nodes } from "@keelson/db";
import { and, eq, isNotNull, sql } from "drizzle-orm";
import type { Catalogue } from "../../catalogue/catalogue.ts";
import { notFound } from "../../http/errors.ts";
import { countRoles, masterHealth, type NodeHealthInput, type RoleCounts, workerHealth } from "./health.ts";
import type { ClusterView } from "./presenters.ts";

export type ClusterRow = typeof clusters.$inferSelect;

const healthColumns = {
  clusterId: nodes.clusterId,
  isMaster: nodes.isMaster,
  status: nodes.status,
  agentConnected: nodes.agentConnected,
  apiResponding: nodes.apiResponding,
};

/**
 * Cluster reads are the hottest path of the API. Building a drizzle query costs far more than
 * running it, so the read queries are prepared once per database and reused.
 */
function prepareReads(db: Db) {
  const projectId = sql.placeholder("projectId");
  return {
    cluster: db
      .select()
      .from(clusters)
      .where(and(eq(clusters.id, sql.placeholder("clusterId")), eq(clusters.projectId, projectId)))
      .prepare(),
    clusters: db.select().from(clusters).where(eq(clusters.projectId, projectId)).orderBy(clusters.createdAt).prepare(),
    providers: db
      .select({ id: cloudProviders.id, name: cloudProviders.name, type: cloudProviders.type })
      .from(cloudProviders)
      .where(eq(cloudProviders.projectId, projectId))
      .prepare(),
    pools: db
      .select({ id: nodePools.id, name: nodePools.name })
      .from(nodePools)
      .where(eq(nodePools.projectId, projectId))
      .prepare(),
    clusterNodes: db
      .select(healthColumns)
      .from(nodes)
      .where(eq(nodes.clusterId, sql.placeholder("clusterId")))
      .prepare(),
    attachedNodes: db
      .select(healthColumns)
      .from(nodes)
      .where(and(eq(nodes.projectId, projectId), isNotNull(nodes.clusterId)))
      .prepare(),
  };
}

const prepared = new WeakMap<Db, ReturnType<typeof prepareReads>>();

function reads(db: Db) {
  let statements = prepared.get(db);
  if (!statements) {
    statements = prepareReads(db);
    prepared.set(db, statements);
  }
  return statements;
}

export function findCluster(db: Pick<Db, "select">, projectId: string, clusterId: string): ClusterRow {
  // Inside a transaction `db` is the transaction object, which has no prepared statements of its own.
  const row =
    "$client" in db
      ? reads(db as Db).cluster.get({ clusterId, projectId })
      : db
          .select()
          .from(clusters)
          .where(and(eq(clusters.id, clusterId), eq(clusters.projectId, projectId)))
          .get();
  if (!row) throw notFound("cluster", clusterId);
  return row;
}

export function listClusterRows(db: Db, projectId: string): ClusterRow[] {
  return reads(db).clusters.all({ projectId });
}

function groupByCluster(rows: (NodeHealthInput & { clusterId: string | null })[]): Map<string, NodeHealthInput[]> {
  const grouped = new Map<string, NodeHealthInput[]>();
  for (const row of rows) {
    if (!row.clusterId) continue;
    const list = grouped.get(row.clusterId) ?? [];
    list.push(row);
    grouped.set(row.clusterId, list);
  }
  return grouped;
}

export function roleCountsOf(db: Db, clusterId: string): RoleCounts {
  return countRoles(reads(db).clusterNodes.all({ clusterId }));
}

/**
 * What the presenters need for clusters of one project, from a fixed number of prepared
 * queries (providers, pools, attached nodes) whatever the number of clusters.
 */
export function buildClusterViews(db: Db, catalogue: Catalogue, projectId: string, rows: ClusterRow[]): ClusterView[] {
  if (rows.length === 0) return [];
  const statements = reads(db);
  const providers = new Map(statements.providers.all({ projectId }).map((p) => [p.id, p]));
  const pools = new Map(statements.pools.all({ projectId }).map((p) => [p.id, p]));
  const nodesByCluster =
    rows.length === 1
      ? new Map([[rows[0]?.id as string, statements.clusterNodes.all({ clusterId: rows[0]?.id as string })]])
      : groupByCluster(statements.attachedNodes.all({ projectId }));
  return rows.map((row) => {
    const provider = providers.get(row.cloudProviderId);
    const roles = countRoles(nodesByCluster.get(row.id) ?? []);
    // Manual-deploy clusters count what is attached, not what was asked for at create.
    const spec =
      provider?.type === "local" ? { ...row.spec, numMasters: roles.masters, numWorkers: roles.workers } : row.spec;
    return {
      row: { ...row, spec },
      cloudProvider: { uuid: row.cloudProviderId, name: provider?.name ?? "", type: provider?.type ?? "" },
      nodePool: { uuid: row.nodePoolId, name: pools.get(row.nodePoolId)?.name ?? "" },
      masterStatus: masterHealth(roles.masters, roles.healthyMasters),
      workerStatus: workerHealth(roles.workers, roles.healthyWorkers),
      upgrade: catalogue.upgradeTargets(row.kubeRoleVersion),
      etcdVersion: catalogue.find(row.kubeRoleVersion)?.etcdVersion ?? "",
    } satisfies ClusterView;
  });
}
