import { and, eq, isNull, lt, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { clusterChanges } from "../schema.ts";
import { databaseTime, dialectOf, firstColumn, perDatabase, prepare } from "./portable.ts";
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
  // A folded row stands for `folded` rows whose ids sum to `id_sum` (foldClusterChanges).
  const counted = (where: SQL | undefined) =>
    sql`select sum(coalesce(${clusterChanges.folded}, 1)) as n, sum(coalesce(${clusterChanges.idSum}, ${clusterChanges.id})) as s from ${clusterChanges} where ${where}`;
  const project = eq(clusterChanges.projectId, projectId);
  const parts =
    clusterId === undefined
      ? counted(project)
      : sql`${counted(and(project, eq(clusterChanges.clusterId, clusterId)))} union all ${counted(and(project, isNull(clusterChanges.clusterId)))}`;
  return sql<string>`(select coalesce(cast(sum(n) as text), '0') || ':' || coalesce(cast(sum(s) as text), '0') from (${parts}) as stamp_parts)`;
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

/** Rows older than this are folded: the stamp reads of a cluster that keeps changing count a few rows. */
export const CLUSTER_CHANGES_FOLD_AFTER_MS = 1_000;

/**
 * Replaces the rows of each (project, cluster) older than `afterMs` (by the database's clock),
 * where there are several, by one row that stands for them: their count in `folded`, the sum of
 * their ids in `id_sum`. Every stamp stays what it was (it sums those two), so no cached answer
 * is dropped, and a read's stamp then counts the rows of the last moments and one row for the
 * rest, however many changes the minute saw. The soundness argument of clusterChangeStamp holds
 * for the rows folded rows stand for: a prune removes a folded row when it is past the retention
 * counted from the fold, later than its rows would have gone. Answers how many rows went into folds.
 *
 * One statement on PostgreSQL (readers see the rows or their fold, never neither, and two
 * replicas folding at once each fold only the rows they deleted); on SQLite a transaction whose
 * first statement takes the one write lock.
 */
export async function foldClusterChanges(db: Db, afterMs = CLUSTER_CHANGES_FOLD_AFTER_MS): Promise<number> {
  const dialect = dialectOf(db);
  const before = databaseTime(dialect, -afterMs);
  if (dialect === "postgres") {
    const [rows] = await firstColumn(
      db,
      sql`with grouped as (
        select project_id, cluster_id from cluster_changes where created_at < ${before}
        group by project_id, cluster_id having count(*) > 1
      ), gone as (
        delete from cluster_changes c using grouped g
        where c.project_id = g.project_id and c.cluster_id is not distinct from g.cluster_id and c.created_at < ${before}
        returning c.project_id, c.cluster_id, coalesce(c.folded, 1) as n, coalesce(c.id_sum, c.id) as s
      ), made as (
        insert into cluster_changes (project_id, cluster_id, folded, id_sum)
        select project_id, cluster_id, sum(n), sum(s) from gone group by project_id, cluster_id
      )
      select count(*) from gone`,
    );
    return Number(rows);
  }
  return await db.transaction(async (tx) => {
    // One cutoff for both statements: SQLite's 'now' moves between them.
    const [cutoff] = await firstColumn(tx, sql`select ${before}`);
    // The fold rows come first and take the write lock: nobody adds a row until the commit, so
    // the rows of a group still there after them, older than the cutoff, are the ones folded.
    const made = await firstColumn(
      tx,
      sql`insert into cluster_changes (project_id, cluster_id, folded, id_sum)
        select project_id, cluster_id, sum(coalesce(folded, 1)), sum(coalesce(id_sum, id)) from cluster_changes
        where created_at < ${cutoff} group by project_id, cluster_id having count(*) > 1
        returning id`,
    );
    if (made.length === 0) return 0;
    const first = made.reduce<number>((min, id) => Math.min(min, Number(id)), Number.POSITIVE_INFINITY);
    const gone = await firstColumn(
      tx,
      sql`delete from cluster_changes where created_at < ${cutoff} and id < ${first}
        and (project_id, ifnull(cluster_id, '')) in
          (select project_id, ifnull(cluster_id, '') from cluster_changes where id >= ${first})
        returning id`,
    );
    return gone.length;
  });
}

/** Deletes the rows past the retention (by the database's clock); how many went. */
export async function pruneClusterChanges(db: Db, retentionMs = CLUSTER_CHANGES_RETENTION_MS): Promise<number> {
  const gone = await db
    .delete(clusterChanges)
    .where(lt(clusterChanges.createdAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: clusterChanges.id });
  return gone.length;
}
