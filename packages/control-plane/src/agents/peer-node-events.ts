import type { AgentHub } from "./hub.ts";
import { nodeEventOf, payloadHost } from "./node-event-records.ts";

/** Stored events of other replicas, handed over by the project event fanout (PostgreSQL). */
export interface PeerEventSink {
  /** Whether anything here wants other replicas' events now (else they are not read for it). */
  wanted(): boolean;
  deliver(row: { projectId: string; type: string; payload: string }): void;
}

/**
 * Other replicas' node events, for this replica's waiters. A rollout, a join or a host-agent
 * upgrade runs on the replica that claimed its operation, and waits on `nodeEvents.on(host)`
 * for reports that reach the replica holding the host's link: with agents spread over the
 * replicas, most of its hosts report elsewhere. Every replica stores its node events (the
 * events table, for the event streams) and notifies their ids; here the rows read back are
 * handed to the waiters on their hosts, and their reports to the report book, so a rollout
 * advances on any replica. Only hosts waited on here and not linked here: a host linked here
 * reports here, and a row of another replica about it is from before its link moved.
 */
export function peerNodeEvents(hub: AgentHub): PeerEventSink {
  const { nodeEvents } = hub;
  const forHere = (hostId: string) => nodeEvents.listened(hostId) && !hub.linkedHere(hostId);
  return {
    wanted: () => nodeEvents.listenedHosts > 0,
    deliver(row) {
      if (!row.type.startsWith("node.")) return;
      // Most rows are about hosts not waited on here: those are passed over before JSON.parse.
      const host = payloadHost(row.payload);
      if (host !== undefined && !forHere(host)) return;
      const event = nodeEventOf(row);
      if (event && forHere(event.hostId)) nodeEvents.emitFromPeer(event);
    },
  };
}
