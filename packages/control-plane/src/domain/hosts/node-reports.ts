import { type Db, firstRow, nodes } from "@keelson/db";
import type { NodeReportFrame } from "@keelson/protocol";
import { eq } from "drizzle-orm";
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
  constructor(private readonly db: Db) {}

  /** The cluster the control plane has the host in (null: unattached or unknown). */
  async clusterOf(hostId: string): Promise<string | null> {
    return (await this.row(hostId))?.clusterId ?? null;
  }

  private async row(hostId: string) {
    return firstRow(await this.db.select({ clusterId: nodes.clusterId }).from(nodes).where(eq(nodes.id, hostId)));
  }

  async apply(hostId: string, frame: NodeReportFrame, now = new Date()): Promise<ReportOutcome> {
    const row = await this.row(hostId);
    if (!row) return { stored: false, expected: null };
    if (row.clusterId !== frame.clusterId) return { stored: false, expected: row.clusterId };
    // A report proves the link is up: agent_connected follows at once instead of waiting for
    // the batched presence write, so health derived right after a report sees the node as
    // connected.
    await this.db
      .update(nodes)
      .set({
        status: frame.report.status,
        apiResponding: frame.apiResponding ? 1 : 0,
        phases: frame.report.phases,
        agentConnected: 1,
        lastSeen: now.toISOString(),
      })
      .where(eq(nodes.id, hostId));
    return { stored: true };
  }
}
