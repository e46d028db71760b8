import { EtcdMemberHealth, NodePhaseReport } from "@keelson/protocol";
import { Type } from "typebox";
import { Compile } from "typebox/compile";
import type { NodeEvent } from "./node-events.ts";
import { phasesJson } from "./phases-json.ts";

/**
 * A node event as the events table stores it (and an event stream shows it): its name and its
 * data as JSON text. The one home of that form both ways: the project event fanout writes it, and
 * on PostgreSQL a replica reads other replicas' rows back into node events for its own waiters on
 * those hosts (peer-node-events.ts), so what one replica wrote must decode to the event it had.
 * Every kind's data has `hostId` first, so a reader can tell the host without parsing (payloadHost).
 */
export interface NodeEventRecord {
  type: "node.report" | "node.connected" | "node.disconnected" | "node.agent";
  /** The data's JSON text, in the order of the fields below: the stored payload. */
  payload: string;
}

export function nodeEventRecord(e: NodeEvent): NodeEventRecord {
  if (e.type === "link") {
    return {
      type: e.connected ? "node.connected" : "node.disconnected",
      payload: JSON.stringify({ hostId: e.hostId }),
    };
  }
  if (e.type === "agent") {
    const { type: _t, projectId: _p, hostId, ...rest } = e;
    return { type: "node.agent", payload: JSON.stringify({ hostId, ...rest }) };
  }
  // hostId, clusterId, status, apiResponding, phases, then etcd and command when present. The
  // phases' text is the one the node's row got (phasesJson), spliced in: a report's phase list
  // is serialised once, not once for the row and once for the event.
  const head = { hostId: e.hostId, clusterId: e.clusterId, status: e.report.status, apiResponding: e.apiResponding };
  const tail = {
    ...(e.etcd ? { etcd: e.etcd } : {}),
    // Present only for an agent that names its command: null before the node's first.
    ...(e.namesCommands ? { command: e.command ?? null } : {}),
  };
  const tailText = JSON.stringify(tail).slice(1, -1);
  const payload = `${JSON.stringify(head).slice(0, -1)},"phases":${phasesJson(e.report.phases)}${tailText ? `,${tailText}` : ""}}`;
  return { type: "node.report", payload };
}

const HostId = Type.String({ minLength: 1, maxLength: 128 });

// What other replicas wrote: checked before it reaches a waiter (a replica of another version
// may write a form this one does not know; it is then not delivered, never half-read).
const ReportData = Compile(
  Type.Object({
    hostId: HostId,
    clusterId: Type.Union([Type.String(), Type.Null()]),
    status: NodePhaseReport.properties.status,
    apiResponding: Type.Boolean(),
    phases: NodePhaseReport.properties.phases,
    etcd: Type.Optional(EtcdMemberHealth),
    command: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  }),
);
const LinkData = Compile(Type.Object({ hostId: HostId }));
const AgentData = Compile(
  Type.Object({
    hostId: HostId,
    agentVersion: Type.String(),
    agentStatus: Type.String(),
    agentError: Type.Union([Type.String(), Type.Null()]),
  }),
);

const HOST_FIRST = '{"hostId":"';

/**
 * The host a stored node event's payload names, read without JSON.parse: while a rollout waits
 * on a replica, every other replica's node event reaches it and most are about hosts it does not
 * wait on. Undefined when the payload does not begin as nodeEventRecord's data does (then it is
 * parsed in full), or when the id holds a backslash (a JSON escape: the text is then not the id).
 * JSON.stringify writes each key once, so the first `hostId` is the one JSON.parse would read.
 */
export function payloadHost(payload: string): string | undefined {
  if (!payload.startsWith(HOST_FIRST)) return undefined;
  const end = payload.indexOf('"', HOST_FIRST.length);
  if (end < 0) return undefined;
  const id = payload.slice(HOST_FIRST.length, end);
  return id.includes("\\") ? undefined : id;
}

/** The node event a stored row holds; undefined for another kind of event or a form not known here. */
export function nodeEventOf(row: { projectId: string; type: string; payload: string }): NodeEvent | undefined {
  if (!row.type.startsWith("node.")) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(row.payload);
  } catch {
    return undefined;
  }
  const { projectId } = row;
  if (row.type === "node.report" && ReportData.Check(data)) {
    const { hostId, clusterId, status, apiResponding, phases, etcd, command } = data;
    return {
      type: "node-report",
      hostId,
      projectId,
      clusterId,
      report: { status, phases },
      apiResponding,
      ...(etcd ? { etcd } : {}),
      namesCommands: command !== undefined,
      ...(typeof command === "string" ? { command } : {}),
    };
  }
  if ((row.type === "node.connected" || row.type === "node.disconnected") && LinkData.Check(data)) {
    return { type: "link", hostId: data.hostId, projectId, connected: row.type === "node.connected" };
  }
  if (row.type === "node.agent" && AgentData.Check(data)) return { type: "agent", projectId, ...data };
  return undefined;
}
