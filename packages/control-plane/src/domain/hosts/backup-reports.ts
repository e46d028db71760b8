import type { Db } from "@keelson/db";
import type { BackupReportFrame } from "@keelson/protocol";
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
  private readonly nodeStatement;
  private readonly record;
  private readonly mastersStatement;
  private readonly write;

  constructor(private readonly db: Db) {
    this.nodeStatement = db.$client.prepare<[string], { cluster_id: string | null; is_master: number }>(
      "SELECT cluster_id, is_master FROM nodes WHERE id = ?",
    );
    this.record = db.$client.prepare(
      "UPDATE nodes SET backup_status = ?, backup_error = ?, backup_cluster_id = ? WHERE id = ?",
    );
    this.mastersStatement = db.$client.prepare<
      [string, string],
      { id: string; name: string; backup_status: string; backup_error: string | null }
    >(
      "SELECT id, name, backup_status, backup_error FROM nodes WHERE cluster_id = ? AND is_master = 1 " +
        "AND backup_cluster_id = ? AND backup_status IS NOT NULL ORDER BY name, id",
    );
    this.write = db.$client.prepare(
      "UPDATE clusters SET backup_task_status = ?, backup_task_error_detail = ? WHERE id = ?",
    );
  }

  apply(hostId: string, frame: BackupReportFrame): BackupOutcome {
    const node = this.nodeStatement.get(hostId);
    if (!node || node.cluster_id !== frame.clusterId) {
      return { stored: false, why: `host is not a node of cluster ${frame.clusterId}` };
    }
    if (node.is_master !== 1) return { stored: false, why: "only masters take etcd backups" };
    const clusterId = frame.clusterId;
    this.db.$client.transaction(() => {
      const error = frame.ok ? null : (frame.error ?? "etcd backup failed").slice(0, 2048);
      this.record.run(frame.ok ? "success" : "error", error, clusterId, hostId);
      const failed = this.mastersStatement.all(clusterId, clusterId).filter((m) => m.backup_status === "error");
      const detail = failed.map((m) => `master ${m.name} (${m.id}): ${m.backup_error ?? "etcd backup failed"}`);
      this.write.run(failed.length > 0 ? "error" : "success", detail.join("; ").slice(0, 4096), clusterId);
    })();
    return { stored: true };
  }
}
