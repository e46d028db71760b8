import { and, eq, isNull, lt, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { clusterChanges } from "../schema.ts";
import { databaseTime, dialectOf, perDatabase, prepare } from "./portable.ts";
import type { Db } from "./types.ts";

/** Rows older than this are pruned: a stamp only has to outlive the read it guards. */
export const CLUSTER_CHANGES_RETENTION_MS = 60_000;

/**
 * The stamp of a project's cluster list (or, with `clusterId`, of that cluster's record) as text,
 * `count:sum of ids`: one scalar subquery, so a read can bring it as a column from its own
 * snapshot and need no second look at the log (http/snapshot-cache.ts). A
 * record's stamp counts its cluster's rows and the project-wide ones (a provider or pool
 * renamed) as two lookups of the (project, cluster, id) index: written as one condition with an
 * OR, SQLite read every row of the project for it, thousands during a rollout or after a burst
 * of creates, at every read of a record.
 */
export function clusterChangeStampColumn(projectId: SQLWrapper, clusterId?: SQLWrapper): SQL<string> {
  const counted = (where: SQL | undefined) =>
    sql`select count(*) as n, sum(${clusterChanges.id}) as s from ${clusterChanges} where ${where}`;
  const project = eq(clusterChanges.projectId, projectId);
  const parts =
    clusterId === undefined
      ? counted(project)
      : sql`${counted(and(project, eq(clusterChanges.clusterId, clusterId)))} union all ${counted(and(project, isNull(clusterChanges.clusterId)))}`;
  return sql<string>`(select cast(sum(n) as text) || ':' || coalesce(cast(sum(s) as text), '0') from (${parts}) as stamp_parts)`;
}

function prepareStamps(db: Db) {
  const projectId = sql.placeholder("projectId");
  const clusterId = sql.placeholder("clusterId");
  const alone = (stamp: SQL<string>) => db.select({ stamp }).from(sql`(select 1) as one`);
  return {
    project: prepare(db, "cluster_changes_project", alone(clusterChangeStampColumn(projectId))),
    cluster: prepare(db, "cluster_changes_cluster", alone(clusterChangeStampColumn(projectId, clusterId))),
  };
}

const stamps = perDatabase(prepareStamps);

/**
 * A value that changes whenever a change to what a project's cluster records show commits
 * (or, with `clusterId`, to what that one cluster's record shows), whoever wrote it: the count
 * of the log's rows for it and the sum of their ids. A commit adds a row (the count moves); a
 * prune removes old rows (the count falls); both between two reads leave the sum changed,
 * because a row added now has a larger id than every row old enough to be pruned. So two equal
 * stamps mean nothing the read shows committed in between: a cache may serve what it computed
 * under it. (The one way round it: a writing transaction open longer than the retention, whose
 * row is pruned as it commits. Keelson's transactions last milliseconds.)
 */
export async function clusterChangeStamp(db: Db, projectId: string, clusterId?: string): Promise<string> {
  const statements = stamps(db);
  const row =
    clusterId === undefined
      ? await statements.project.get({ projectId })
      : await statements.cluster.get({ projectId, clusterId });
  // The one-row derived table always gives its row.
  return row?.stamp ?? "0:0";
}

/** Deletes the rows past the retention (by the database's clock); how many went. */
export async function pruneClusterChanges(db: Db, retentionMs = CLUSTER_CHANGES_RETENTION_MS): Promise<number> {
  const gone = await db
    .delete(clusterChanges)
    .where(lt(clusterChanges.createdAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: clusterChanges.id });
  return gone.length;
}
