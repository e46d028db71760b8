import { EventEmitter } from "node:events";
import type { EtcdMemberHealth, NodePhaseReport } from "@keelson/protocol";

/** A node report the hub accepted and stored (nodes.status / api_responding / phases). */
export interface NodeReportEvent {
  type: "node-report";
  hostId: string;
  /** The host's project (from its credential): an event stream filters on it without a lookup. */
  projectId: string;
  clusterId: string | null;
  report: NodePhaseReport;
  apiResponding: boolean;
  /** Masters whose etcd runs: members and healthy members as this one sees them (older agents: absent). */
  etcd?: EtcdMemberHealth;
  /**
   * The agent names in its reports the node.restart / node.upgrade it is carrying out (it
   * declared `node-report-command` and was welcomed with it); false for an older agent.
   */
  namesCommands: boolean;
  /** The command this report shows the work of (namesCommands: absent before the node's first). */
  command?: string;
}

/** A host's link came up (after its hello) or went down. */
export interface NodeLinkEvent {
  type: "link";
  hostId: string;
  projectId: string;
  connected: boolean;
}

/**
 * What the agent says about itself (its hello, or a status frame): version and upgrade state.
 * Host-agent upgrades wait on these; the row is written later, in the presence batch.
 */
export interface NodeAgentEvent {
  type: "agent";
  hostId: string;
  projectId: string;
  agentVersion: string;
  agentStatus: string;
  agentError: string | null;
}

export type NodeEvent = NodeReportEvent | NodeLinkEvent | NodeAgentEvent;

/** The agent event of what a host's agent said about itself (its hello or a status frame). */
export function agentEvent(
  host: { hostId: string; projectId: string },
  said: { agentVersion: string; agentStatus: string; agentError?: string | undefined },
): NodeAgentEvent {
  const { hostId, projectId } = host;
  const { agentVersion, agentStatus } = said;
  return { type: "agent", hostId, projectId, agentVersion, agentStatus, agentError: said.agentError ?? null };
}

/**
 * In-process events about nodes, so operations waiting for a node wake up when it reports
 * instead of polling the database. `on(hostId, ...)` is keyed: an attach of 1,000 nodes keeps
 * 1,000 listeners, and each report reaches only its own host's listener, not all of them.
 * Listeners run synchronously right after the row was written, so a reader that checks the
 * row and subscribes in the same tick cannot miss a change.
 */
export class NodeEvents {
  /** Every event, for listeners that want them all (logs, future event streams). */
  readonly all = new EventEmitter<{
    "node-report": [NodeReportEvent];
    link: [NodeLinkEvent];
    agent: [NodeAgentEvent];
  }>();
  /**
   * Reports of hosts linked to another replica, read back from the events table for this
   * replica's waiters on them (peer-node-events.ts). Apart from `all`: what follows `all`
   * (the event log, metrics, the health follower) already had them on the replica holding
   * the link.
   */
  readonly fromPeers = new EventEmitter<{ "node-report": [NodeReportEvent] }>();
  private readonly byHost = new Map<string, Set<(event: NodeEvent) => void>>();

  constructor() {
    this.all.setMaxListeners(0);
  }

  /** Calls `listener` for each event of `hostId` until the returned function is called. */
  on(hostId: string, listener: (event: NodeEvent) => void): () => void {
    let set = this.byHost.get(hostId);
    if (!set) {
      set = new Set();
      this.byHost.set(hostId, set);
    }
    set.add(listener);
    return () => {
      const current = this.byHost.get(hostId);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.byHost.delete(hostId);
    };
  }

  emit(event: NodeEvent): void {
    if (event.type === "node-report") this.all.emit("node-report", event);
    else if (event.type === "link") this.all.emit("link", event);
    else this.all.emit("agent", event);
    this.toListeners(event);
  }

  /** Another replica's event of a host waited on here (see `fromPeers`). */
  emitFromPeer(event: NodeEvent): void {
    if (event.type === "node-report") this.fromPeers.emit("node-report", event);
    this.toListeners(event);
  }

  /** Whether a listener waits on `hostId` here. */
  listened(hostId: string): boolean {
    return this.byHost.has(hostId);
  }

  /** Hosts with a listener here. */
  get listenedHosts(): number {
    return this.byHost.size;
  }

  private toListeners(event: NodeEvent): void {
    const set = this.byHost.get(event.hostId);
    if (!set) return;
    for (const listener of [...set]) listener(event);
  }

  /** Listeners currently registered for one host (tests). */
  listenerCount(hostId: string): number {
    return this.byHost.get(hostId)?.size ?? 0;
  }
}
