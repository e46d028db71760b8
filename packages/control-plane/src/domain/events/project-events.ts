import type { NodeAgentEvent, NodeLinkEvent, NodeReportEvent } from "../../agents/node-events.ts";
import type { Keelson } from "../../context.ts";
import type { OperationEvent } from "../../runner/types.ts";

export type ProjectEventName =
  | OperationEvent["type"]
  | "node.report"
  | "node.connected"
  | "node.disconnected"
  | "node.agent";

/**
 * Follows one project's operation events (runner) and node events (hub) and hands each to
 * `send` as a named event with a JSON-able body. Node events carry only a host id, so the
 * host's project is looked up once per host and remembered (a host never changes project).
 * Returns the function that stops following; call it when the client goes away.
 */
export function followProjectEvents(
  k: Pick<Keelson, "db" | "runner" | "agents">,
  projectId: string,
  send: (name: ProjectEventName, data: unknown) => void,
): () => void {
  const projectOf = new Map<string, string | null>();
  const lookup = k.db.$client.prepare("SELECT project_id FROM nodes WHERE id = ?");
  const mine = (hostId: string): boolean => {
    if (!projectOf.has(hostId)) {
      const row = lookup.get(hostId) as { project_id: string } | undefined;
      projectOf.set(hostId, row?.project_id ?? null);
    }
    return projectOf.get(hostId) === projectId;
  };

  const onOperation = (e: OperationEvent) => {
    if (e.projectId === projectId) send(e.type, e);
  };
  const onReport = (e: NodeReportEvent) => {
    if (!mine(e.hostId)) return;
    send("node.report", {
      hostId: e.hostId,
      clusterId: e.clusterId,
      status: e.report.status,
      apiResponding: e.apiResponding,
      phases: e.report.phases,
      ...(e.etcd ? { etcd: e.etcd } : {}),
    });
  };
  const onLink = (e: NodeLinkEvent) => {
    if (mine(e.hostId)) send(e.connected ? "node.connected" : "node.disconnected", { hostId: e.hostId });
  };
  const onAgent = (e: NodeAgentEvent) => {
    if (!mine(e.hostId)) return;
    const { type: _t, ...rest } = e;
    send("node.agent", rest);
  };

  const nodeEvents = k.agents.nodeEvents.all;
  k.runner.events.on("event", onOperation);
  nodeEvents.on("node-report", onReport);
  nodeEvents.on("link", onLink);
  nodeEvents.on("agent", onAgent);
  return () => {
    k.runner.events.off("event", onOperation);
    nodeEvents.off("node-report", onReport);
    nodeEvents.off("link", onLink);
    nodeEvents.off("agent", onAgent);
  };
}
