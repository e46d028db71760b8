import { and, eq, isNull, lt, or, type SQL, type SQLWrapper, sql } from "drizzle-orm";
import { clusterChanges } from "../schema.ts";
import { databaseTime, dialectOf, perDatabase, prepare } from "./portable.ts";
import type { Db } from "./types.ts";

/** Rows older than this are pruned: a stamp only has to outlive the read it guards. */
export const CLUSTER_CHANGES_RETENTION_MS = 60_000;

/** The rows a read of the project's clusters (or, with `clusterId`, of that one) depends on. */
function changesOf(projectId: SQLWrapper, clusterId?: SQLWrapper): SQL | undefined {
  const project = eq(clusterChanges.projectId, projectId);
  return clusterId === undefined
    ? project
    : and(project, or(eq(clusterChanges.clusterId, clusterId), isNull(clusterChanges.clusterId)));
}

/** The stamp as text, `count:sum of ids`, written once for both of its uses below. */
const stampText = sql<string>`cast(count(*) as text) || ':' || coalesce(cast(sum(${clusterChanges.id}) as text), '0')`;

/**
 * The stamp as a column of another read: a subquery that the same statement, and so the same
 * snapshot, evaluates once. A read that brings its stamp this way needs no second look at the
 * log to know that nothing changed while it read (http/snapshot-cache.ts).
 */
export function clusterChangeStampColumn(projectId: SQLWrapper, clusterId?: SQLWrapper): SQL<string> {
  return sql<string>`(select ${stampText} from ${clusterChanges} where ${changesOf(projectId, clusterId)})`;
}

function prepareStamps(db: Db) {
  const projectId = sql.placeholder("projectId");
  const clusterId = sql.placeholder("clusterId");
  const stamp = () => db.select({ stamp: stampText }).from(clusterChanges);
  return {
    project: prepare(db, "cluster_changes_project", stamp().where(changesOf(projectId))),
    cluster: prepare(db, "cluster_changes_cluster", stamp().where(changesOf(projectId, clusterId))),
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
  // An aggregate without GROUP BY always gives its one row.
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
