import { clusters, type Db } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { notFound } from "../../http/errors.ts";

export type ClusterRow = typeof clusters.$inferSelect;

/** The cluster, looked up inside the path's project: another project's cluster is as unknown as a missing one. */
export function findClusterInProject(db: Db, projectId: string, clusterId: string): ClusterRow {
  const row = db
    .select()
    .from(clusters)
    .where(and(eq(clusters.id, clusterId), eq(clusters.projectId, projectId)))
    .get();
  if (!row) throw notFound("cluster", clusterId);
  return row;
}
