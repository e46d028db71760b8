import {
  cloudProviders,
  clusterChangeStampColumn,
  clusters,
  type Db,
  dialectOf,
  firstRow,
  jsonArrayOf,
  nodePools,
  perDatabase,
  prepare,
  type Tx,
} from "@keelson/db";
import { and, eq, gt, or, type SQL, sql } from "drizzle-orm";
import { notFound } from "../../http/errors.ts";
import { FIRST_PAGE, keysetPage, type PageRequest } from "../../http/paging.ts";
import type { Catalogue } from "../catalogue/catalogue.ts";
import { countRoles, masterHealth, type NodeHealthInput, type RoleCounts, workerHealth } from "./health/health.ts";
import type { ClusterView } from "./present/presenters.ts";

export type ClusterRow = typeof clusters.$inferSelect;

/**
 * The health inputs of a cluster's nodes, as one JSON array per cluster row: the health rule
 * itself stays in health.ts, and a read needs one query whatever the number of nodes. The
 * outer column is written out qualified: drizzle renders `${clusters.id}` as a bare "id" in a
 * single-table select, which inside the subquery would mean n.id.
 */
function nodeHealthJson(db: Db) {
  return jsonArrayOf(
    dialectOf(db),
    {
      isMaster: sql`n.is_master`,
      status: sql`n.status`,
      agentConnected: sql`n.agent_connected`,
      apiResponding: sql`n.api_responding`,
    },
    sql`from nodes n where n.cluster_id = "clusters"."id"`,
  );
}

/**
 * Cluster reads are the hottest path of the API. Building a drizzle query costs far more than
 * running it, so the read queries are prepared once per database and reused, and one query
 * brings a cluster with its provider, pool and node health, and the change stamp (@keelson/db
 * clusterChangeStamp) of what it read, from the same snapshot: a cached read filed under that
 * stamp needs no second look at the change log (http/snapshot-cache.ts).
 */
function prepareReads(db: Db) {
  const projectId = sql.placeholder("projectId");
  const clusterId = sql.placeholder("clusterId");
  const nodes = nodeHealthJson(db);
  const joined = (stamp: SQL<string>) =>
    db
      .select({
        cluster: clusters,
        providerName: cloudProviders.name,
        providerType: cloudProviders.type,
        poolName: nodePools.name,
        nodes,
        stamp,
      })
      .from(clusters)
      .innerJoin(cloudProviders, eq(cloudProviders.id, clusters.cloudProviderId))
      .innerJoin(nodePools, eq(nodePools.id, clusters.nodePoolId));
  return {
    // The cluster's stamp, and its row only when that stamp is not `known` (the one its cached
    // record was computed under): one statement whether the record changed or not. The stamp
    // comes from a one-row derived table, so it is there when the row is not.
    viewUnless: prepare(
      db,
      "cluster_view_unless",
      db
        .select({
          stamp: sql<string>`stamped.stamp`,
          cluster: clusters,
          providerName: cloudProviders.name,
          providerType: cloudProviders.type,
          poolName: nodePools.name,
          nodes,
        })
        // `limit 1` keeps PostgreSQL from pulling the one-row table up into the join, which
        // would evaluate the stamp's subquery once per use (twice).
        .from(sql`(select ${clusterChangeStampColumn(projectId, clusterId)} as stamp limit 1) stamped`)
        .leftJoin(
          clusters,
          and(
            // The key is null when the stamp is the known one: no lookup at all then (a join
            // condition beside the key left PostgreSQL fetching the row and its joins anyway, a
            // warm read half again as dear as the stamp alone).
            eq(
              clusters.id,
              sql`case when cast(${sql.placeholder("known")} as text) is null or stamped.stamp <> ${sql.placeholder("known")} then ${clusterId} end`,
            ),
            eq(clusters.projectId, projectId),
          ),
        )
        .leftJoin(cloudProviders, eq(cloudProviders.id, clusters.cloudProviderId))
        .leftJoin(nodePools, eq(nodePools.id, clusters.nodePoolId)),
    ),
    // The uuid breaks ties of creation time: the order, and so the pages of a paged list, stay put.
    views: prepare(
      db,
      "cluster_views",
      joined(clusterChangeStampColumn(projectId))
        .where(eq(clusters.projectId, projectId))
        .orderBy(clusters.createdAt, clusters.id),
    ),
    // A page of that list (http/paging.ts): the rows after a marker's (creation time, uuid), by
    // the same order, so a page of a large list reads that page, not the list.
    page: prepare(
      db,
      "cluster_views_page",
      joined(clusterChangeStampColumn(projectId))
        .where(
          and(
            eq(clusters.projectId, projectId),
            or(
              gt(clusters.createdAt, sql.placeholder("afterAt")),
              and(eq(clusters.createdAt, sql.placeholder("afterAt")), gt(clusters.id, sql.placeholder("afterId"))),
            ),
          ),
        )
        .orderBy(clusters.createdAt, clusters.id)
        .limit(sql.placeholder("limit")),
    ),
    roles: prepare(db, "cluster_roles", db.select({ nodes }).from(clusters).where(eq(clusters.id, clusterId))),
  };
}

const reads = perDatabase(prepareReads);

export async function findCluster(db: Tx, projectId: string, clusterId: string): Promise<ClusterRow> {
  const row = firstRow(
    await db
      .select()
      .from(clusters)
      .where(and(eq(clusters.id, clusterId), eq(clusters.projectId, projectId))),
  );
  if (!row) throw notFound("cluster", clusterId);
  return row;
}

function parseNodes(json: string | null): NodeHealthInput[] {
  return json ? (JSON.parse(json) as NodeHealthInput[]) : [];
}

export async function roleCountsOf(db: Db, clusterId: string): Promise<RoleCounts> {
  return countRoles(parseNodes((await reads(db).roles.get({ clusterId }))?.nodes ?? null));
}

type JoinedRow = {
  cluster: ClusterRow;
  providerName: string;
  providerType: string;
  poolName: string;
  nodes: string | null;
};

/**
 * What a read gave and the change stamp of the snapshot it read; no stamp when it found no
 * row to carry one (an empty list).
 */
export interface Stamped<T> {
  value: T;
  stamp: string | undefined;
}

function toView(catalogue: Catalogue, r: JoinedRow): ClusterView {
  const row = r.cluster;
  const roles = countRoles(parseNodes(r.nodes));
  // Manual-deploy clusters count what is attached, not what was asked for at create.
  const spec =
    r.providerType === "local" ? { ...row.spec, numMasters: roles.masters, numWorkers: roles.workers } : row.spec;
  return {
    row: { ...row, spec },
    cloudProvider: { uuid: row.cloudProviderId, name: r.providerName, type: r.providerType },
    nodePool: { uuid: row.nodePoolId, name: r.poolName },
    masterStatus: masterHealth(roles.masters, roles.healthyMasters),
    workerStatus: workerHealth(roles.workers, roles.healthyWorkers),
    upgrade: catalogue.upgradeTargets(row.kubeRoleVersion),
    etcdVersion: catalogue.find(row.kubeRoleVersion)?.etcdVersion ?? "",
  };
}

/**
 * One cluster of a project, ready for the presenters, and the stamp of what it read; only the
 * stamp when it is `known` (the record is unchanged since a read under it). 404 when the
 * project has no such cluster.
 */
export async function getClusterViewUnless(
  db: Db,
  catalogue: Catalogue,
  projectId: string,
  clusterId: string,
  known: string | undefined,
): Promise<{ stamp: string; view?: ClusterView }> {
  const row = await reads(db).viewUnless.get({ clusterId, projectId, known: known ?? null });
  if (!row) throw new Error("the cluster read gave no row: its stamp's derived table always has one");
  const { stamp, cluster, providerName, providerType, poolName, nodes } = row;
  if (stamp === known) return { stamp };
  if (!cluster || providerName == null || providerType == null || poolName == null)
    throw notFound("cluster", clusterId);
  return { stamp, view: toView(catalogue, { cluster, providerName, providerType, poolName, nodes: nodes ?? null }) };
}

/** Every cluster of a project, oldest first, ready for the presenters, from one query. */
export async function listClusterViews(
  db: Db,
  catalogue: Catalogue,
  projectId: string,
): Promise<Stamped<ClusterView[]>> {
  const rows = await reads(db).views.all({ projectId });
  return { value: rows.map((r) => toView(catalogue, r)), stamp: rows[0]?.stamp };
}

/** A page of that list: `limit` clusters after `after` (from the first without), and the marker of the next. */
export async function listClusterViewsPage(
  db: Db,
  catalogue: Catalogue,
  projectId: string,
  page: PageRequest,
): Promise<Stamped<{ items: ClusterView[]; next?: string }>> {
  const after = page.after ?? FIRST_PAGE;
  // One row more than the page: whether there is a next page, without counting.
  const rows = await reads(db).page.all({ projectId, afterAt: after.at, afterId: after.id, limit: page.limit + 1 });
  const value = keysetPage(
    rows.map((r) => toView(catalogue, r)),
    (v) => ({ at: v.row.createdAt, id: v.row.id }),
    page.limit,
  );
  return { value, stamp: rows[0]?.stamp };
}
