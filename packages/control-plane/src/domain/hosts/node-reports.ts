import type { Db } from "@keelson/db";
import type { NodeReportFrame } from "@keelson/protocol";
import type { ReportOutcome } from "../../agents/link-domain.ts";

/**
 * Stores a node's phase report (nodes.status, api_responding, phases). Reports are written at
 * once, not batched like presence: an operation may be waiting for exactly this row, and a
 * report is rare next to heartbeats (a few dozen per node per attach).
 *
 * A report counts only for the cluster the control plane has the node in. An agent that has
 * not received its node.join yet still reports its old membership (usually none, status ok),
 * and after a detach a report of the old cluster may still be in flight; taking either as the
 * node's state would make a converging node look ok, or an unattached one look attached.
 */
export class NodeReportWriter {
  private readonly clusterStatement;
  private readonly write;

  constructor(db: Db) {
    this.clusterStatement = db.$client.prepare<[string], { cluster_id: string | null }>(
      "SELECT cluster_id FROM nodes WHERE id = ?",
    );
    // A report proves the link is up: agent_connected follows at once instead of waiting for
    // the batched presence write, so health derived right after a report sees the node as
    // connected.
    this.write = db.$client.prepare(
      "UPDATE nodes SET status = ?, api_responding = ?, phases = ?, agent_connected = 1, last_seen = ? WHERE id = ?",
    );
  }

  /** The cluster the control plane has the host in (null: unattached or unknown). */
  clusterOf(hostId: string): string | null {
    return this.clusterStatement.get(hostId)?.cluster_id ?? null;
  }

  apply(hostId: string, frame: NodeReportFrame, now = new Date()): ReportOutcome {
    const row = this.clusterStatement.get(hostId);
    if (!row) return { stored: false, expected: null };
    if (row.cluster_id !== frame.clusterId) return { stored: false, expected: row.cluster_id };
    this.write.run(
      frame.report.status,
      frame.apiResponding ? 1 : 0,
      JSON.stringify(frame.report.phases),
      now.toISOString(),
      hostId,
    );
    return { stored: true };
  }
}
