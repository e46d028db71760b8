import { clusters, type Db, firstRow, lockRows, nodes } from "@keelson/db";
import type { BackupReportFrame } from "@keelson/protocol";
import { and, asc, eq, isNotNull } from "drizzle-orm";
import type { BackupOutcome } from "../../agents/link-domain.ts";

/**
 * Stores a master's etcd backup result and folds its cluster's backup status from every
 * master's latest one (clusters.backup_task_status / backup_task_error_detail, read as
 * etcdBackup.taskStatus and taskErrorDetail). Every master backs up its own etcd member, so the
 * status is `error` while any master's latest backup failed (the detail names each such master)
 * and `success` once every master that reported has its latest one succeed: one master failing
 * every run is not hidden by the others succeeding. A report counts only from a master the
 * control plane has in that cluster (a late report after a detach must not touch a cluster the
 * host left), and a master's result counts only for the cluster it was taken for.
 */
export class BackupReportWriter {
  constructor(private readonly db: Db) {}

  async apply(hostId: string, frame: BackupReportFrame): Promise<BackupOutcome> {
    const clusterId = frame.clusterId;
    return this.db.transaction(async (tx) => {
      const node = firstRow(
        await tx
          .select({ clusterId: nodes.clusterId, isMaster: nodes.isMaster })
          .from(nodes)
          .where(eq(nodes.id, hostId)),
      );
      if (!node || node.clusterId !== clusterId) {
        return { stored: false, why: `host is not a node of cluster ${clusterId}` };
      }
      if (node.isMaster !== 1) return { stored: false, why: "only masters take etcd backups" };
      // Two masters reporting at once: the second fold waits for the first and sees its row.
      await lockRows(tx, clusters, eq(clusters.id, clusterId));
      const error = frame.ok ? null : (frame.error ?? "etcd backup failed").slice(0, 2048);
      await tx
        .update(nodes)
        .set({ backupStatus: frame.ok ? "success" : "error", backupError: error, backupClusterId: clusterId })
        .where(eq(nodes.id, hostId));
      const masters = await tx
        .select({ id: nodes.id, name: nodes.name, status: nodes.backupStatus, error: nodes.backupError })
        .from(nodes)
        .where(
          and(
            eq(nodes.clusterId, clusterId),
            eq(nodes.isMaster, 1),
            eq(nodes.backupClusterId, clusterId),
            isNotNull(nodes.backupStatus),
          ),
        )
        .orderBy(asc(nodes.name), asc(nodes.id));
      const failed = masters.filter((m) => m.status === "error");
      const detail = failed.map((m) => `master ${m.name} (${m.id}): ${m.error ?? "etcd backup failed"}`);
      await tx
        .update(clusters)
        .set({
          backupTaskStatus: failed.length > 0 ? "error" : "success",
          backupTaskErrorDetail: detail.join("; ").slice(0, 4096),
        })
        .where(eq(clusters.id, clusterId));
      return { stored: true };
    });
  }
}
