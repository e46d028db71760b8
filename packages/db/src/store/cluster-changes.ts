import { and, count, eq, isNull, lt, or, sql } from "drizzle-orm";
import { clusterChanges } from "../schema.ts";
import { databaseTime, dialectOf, perDatabase, prepare } from "./portable.ts";
import type { Db } from "./types.ts";

/** Rows older than this are pruned: a stamp only has to outlive the read it guards. */
export const CLUSTER_CHANGES_RETENTION_MS = 60_000;

type StampRow = { rows: number; ids: string | null };

function prepareStamps(db: Db) {
  const projectId = sql.placeholder("projectId");
  const stamp = () =>
    db.select({ rows: count(), ids: sql<string | null>`cast(sum(${clusterChanges.id}) as text)` }).from(clusterChanges);
  return {
    project: prepare(db, "cluster_changes_project", stamp().where(eq(clusterChanges.projectId, projectId))),
    cluster: prepare(
      db,
      "cluster_changes_cluster",
      stamp().where(
        and(
          eq(clusterChanges.projectId, projectId),
          or(eq(clusterChanges.clusterId, sql.placeholder("clusterId")), isNull(clusterChanges.clusterId)),
        ),
      ),
    ),
  };
}

const stamps = perDatabase(prepareStamps);

const stampOf = (row: StampRow | undefined) => `${row?.rows ?? 0}:${row?.ids ?? 0}`;

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
  const row: StampRow | undefined =
    clusterId === undefined
      ? await statements.project.get({ projectId })
      : await statements.cluster.get({ projectId, clusterId });
  return stampOf(row);
}

/** Deletes the rows past the retention (by the database's clock); how many went. */
export async function pruneClusterChanges(db: Db, retentionMs = CLUSTER_CHANGES_RETENTION_MS): Promise<number> {
  const gone = await db
    .delete(clusterChanges)
    .where(lt(clusterChanges.createdAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: clusterChanges.id });
  return gone.length;
}
