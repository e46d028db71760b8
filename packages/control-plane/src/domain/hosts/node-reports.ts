import { type Db, dialectOf, firstRow, lockedInIdOrder, nodes, rowsOf, StatementBatch } from "@keelson/db";
import type { NodeReportFrame } from "@keelson/protocol";
import { and, eq, isNull, or, sql } from "drizzle-orm";
import type { ReportOutcome } from "../../agents/link-domain.ts";
import { phasesJson } from "../../agents/phases-json.ts";

/** Reports written by one statement at most (its parameters stay a few MB). */
const MAX_BATCH = 1_000;

interface Report {
  hostId: string;
  frame: NodeReportFrame;
}

/**
 * Stores a node's phase report (nodes.status, api_responding, phases). Reports are written at
 * once, not delayed like presence: an operation may be waiting for exactly this row. But the
 * reports that arrive together (a rollout batch of a hundred nodes reports within a few
 * milliseconds, twice per node) are written by one statement (StatementBatch: those of one
 * event-loop turn, and those received while the previous statement ran), a host's second report
 * in the next statement so its rows are written in the order received. Each caller's promise
 * settles when its row is written (or refused), so the event that follows still comes after the
 * row.
 *
 * A report counts only for the cluster the control plane has the node in. An agent that has
 * not received its node.join yet still reports its old membership (usually none, status ok),
 * and after a detach a report of the old cluster may still be in flight; taking either as the
 * node's state would make a converging node look ok, or an unattached one look attached.
 */
export class NodeReportWriter {
  private readonly batch = new StatementBatch<Report, ReportOutcome>((reports) => this.write(reports), {
    maxItems: MAX_BATCH,
    keyOf: (report) => report.hostId,
  });

  constructor(private readonly db: Db) {}

  /** The cluster the control plane has the host in (null: unattached or unknown). */
  async clusterOf(hostId: string): Promise<string | null> {
    return (await this.row(hostId))?.clusterId ?? null;
  }

  private async row(hostId: string) {
    return firstRow(await this.db.select({ clusterId: nodes.clusterId }).from(nodes).where(eq(nodes.id, hostId)));
  }

  apply(hostId: string, frame: NodeReportFrame): Promise<ReportOutcome> {
    return this.batch.add({ hostId, frame });
  }

  /**
   * One statement for the batch: the membership check is the update's own condition, so no
   * write can come between them. Only a report refused for its cluster costs a read, to say
   * which was expected.
   */
  private async write(batch: Report[], now = new Date()): Promise<ReportOutcome[]> {
    const rows = rowsOf(
      batch.map(({ hostId, frame }) => ({
        h: hostId,
        c: frame.clusterId,
        s: frame.report.status,
        a: frame.apiResponding ? 1 : 0,
        // The JSON text nodes.phases holds (schema.ts: JSON mode), the event's too (phasesJson).
        p: phasesJson(frame.report.phases),
      })),
      {
        r_host: { key: "h", type: "text" },
        r_cluster: { key: "c", type: "text" },
        r_status: { key: "s", type: "text" },
        r_api: { key: "a", type: "integer" },
        r_phases: { key: "p", type: "text" },
      },
    );
    const ids = batch.map((r) => r.hostId);
    // Several hosts in one UPDATE lock their rows in the join's order: on PostgreSQL the rows
    // come through a join with them locked in id order (lockedInIdOrder), so an attach or
    // detach locking some of them waits instead of deadlocking; in the same statement, not in
    // a transaction with a locking SELECT before it (two statements and two round trips less
    // per batch).
    const ordered = dialectOf(this.db) === "postgres" && batch.length > 1;
    const source = ordered
      ? sql`(select r.* from ${rows} as r join ${lockedInIdOrder(nodes, ids)} as l on l.locked_id = r.r_host) as r`
      : sql`${rows} as r`;
    const stored = await this.db
      .update(nodes)
      .set({
        status: sql`r_status`,
        apiResponding: sql`r_api`,
        phases: sql`r_phases`,
        // A report proves the link is up: agent_connected follows at once instead of waiting
        // for the batched presence write, so health derived right after a report sees the
        // node as connected.
        agentConnected: 1,
        lastSeen: now.toISOString(),
      })
      .from(source)
      .where(
        and(
          eq(nodes.id, sql`r.r_host`),
          or(eq(nodes.clusterId, sql`r.r_cluster`), and(isNull(nodes.clusterId), sql`r.r_cluster is null`)),
        ),
      )
      .returning({ id: nodes.id });
    const written = new Set(stored.map((row) => row.id));
    return Promise.all(
      batch.map(
        async ({ hostId }): Promise<ReportOutcome> =>
          written.has(hostId)
            ? { stored: true }
            : { stored: false, expected: (await this.row(hostId))?.clusterId ?? null },
      ),
    );
  }
}
