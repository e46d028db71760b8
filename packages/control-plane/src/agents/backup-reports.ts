import type { Db } from "@keelson/db";
import type { BackupReportFrame } from "@keelson/protocol";

export type BackupOutcome = { stored: true } | { stored: false; why: string };

/**
 * Stores a master's etcd backup result as the cluster's backup status
 * (clusters.backup_task_status / backup_task_error_detail, read as etcdBackup.taskStatus and
 * taskErrorDetail). Every master backs up its own etcd member, so the latest report of any of
 * the cluster's masters is the status; an error names the master it came from. A report
 * counts only from a master the control plane has in that cluster (a late report after a
 * detach must not touch a cluster the host left).
 */
export class BackupReportWriter {
  private readonly nodeStatement;
  private readonly write;

  constructor(db: Db) {
    this.nodeStatement = db.$client.prepare<[string], { cluster_id: string | null; is_master: number }>(
      "SELECT cluster_id, is_master FROM nodes WHERE id = ?",
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
    const detail = frame.ok ? "" : `master ${hostId}: ${frame.error ?? "etcd backup failed"}`.slice(0, 4096);
    this.write.run(frame.ok ? "success" : "error", detail, frame.clusterId);
    return { stored: true };
  }
}
