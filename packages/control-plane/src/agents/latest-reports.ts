import type { EtcdMemberHealth, NodePhaseStatus } from "@keelson/protocol";
import type { AgentHub } from "./hub.ts";
import type { NodeReportEvent } from "./node-events.ts";

/**
 * The book of each host's latest node report to this process (node-events.ts carries them; on
 * PostgreSQL also other replicas' reports of the hosts waited on here), as far as rollouts need
 * it: its etcd member health (absent: a worker, etcd not running, or an agent older than the
 * field), status and API server, the command it names, and when it arrived. In memory only: it
 * says what each host told this process (after a control-plane restart a node's row still shows
 * what it told the previous one; every agent reports right after it reconnects).
 *
 * `seq` orders reports as this process received them: a waiter takes `mark()` before it
 * starts a master's restart and counts only reports with a higher `seq`, which a timestamp
 * of the same millisecond could not tell apart.
 */

export interface LatestReport {
  seq: number;
  /** The cluster the report was stored for (the node's, as the control plane has it). */
  clusterId: string | null;
  phases: unknown[];
  status: NodePhaseStatus;
  apiResponding: boolean;
  etcd: EtcdMemberHealth | undefined;
  /** The agent names its command in reports (NodeReportEvent.namesCommands). */
  namesCommands: boolean;
  /** The node.restart / node.upgrade whose work the report shows. */
  command: string | undefined;
}

export class LatestReports {
  private readonly latest = new Map<string, LatestReport>();
  private seq = 0;

  record(event: NodeReportEvent): void {
    this.seq++;
    this.latest.set(event.hostId, {
      seq: this.seq,
      clusterId: event.clusterId,
      phases: event.report.phases,
      status: event.report.status,
      apiResponding: event.apiResponding,
      etcd: event.etcd,
      namesCommands: event.namesCommands,
      command: event.command,
    });
  }

  /** Reports received from now on have a higher `seq` than this. */
  mark(): number {
    return this.seq;
  }

  latestOf(hostId: string): LatestReport | undefined {
    return this.latest.get(hostId);
  }
}

const books = new WeakMap<AgentHub, LatestReports>();

/** The hub's book, following its reports from the first call on (call once at startup). */
export function latestReports(hub: AgentHub): LatestReports {
  let book = books.get(hub);
  if (!book) {
    const created = new LatestReports();
    book = created;
    books.set(hub, created);
    // Listeners on `all` run before the per-host ones, so a waiter woken by a host's report
    // already finds that report here.
    hub.nodeEvents.all.on("node-report", (event) => created.record(event));
    // And those of hosts linked to another replica, read back for this replica's waiters.
    hub.nodeEvents.fromPeers.on("node-report", (event) => created.record(event));
  }
  return book;
}
