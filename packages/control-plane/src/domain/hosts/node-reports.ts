import { type Db, firstRow, nodes } from "@keelson/db";
import type { NodeReportFrame } from "@keelson/protocol";
import { and, eq, isNull } from "drizzle-orm";
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

  /**
   * One statement for a report of the node's own cluster (the common case, a few per node of
   * every rollout): the membership check is the update's own condition, so no write can come
   * between them. Only a report refused for its cluster costs a read, to say which was expected.
   */
  async apply(hostId: string, frame: NodeReportFrame, now = new Date()): Promise<ReportOutcome> {
    const member = frame.clusterId === null ? isNull(nodes.clusterId) : eq(nodes.clusterId, frame.clusterId);
    // A report proves the link is up: agent_connected follows at once instead of waiting for
    // the batched presence write, so health derived right after a report sees the node as
    // connected.
    const stored = await this.db
      .update(nodes)
      .set({
        status: frame.report.status,
        apiResponding: frame.apiResponding ? 1 : 0,
        phases: frame.report.phases,
        agentConnected: 1,
        lastSeen: now.toISOString(),
      })
      .where(and(eq(nodes.id, hostId), member))
      .returning({ id: nodes.id });
    if (stored.length > 0) return { stored: true };
    return { stored: false, expected: (await this.row(hostId))?.clusterId ?? null };
  }
}
