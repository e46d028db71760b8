import { nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
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
  // The lookup itself is remembered, so events of one host keep their order while it runs.
  const projectOf = new Map<string, Promise<string | null>>();
  const whenMine = (hostId: string, then: () => void): void => {
    let project = projectOf.get(hostId);
    if (!project) {
      project = k.db
        .select({ projectId: nodes.projectId })
        .from(nodes)
        .where(eq(nodes.id, hostId))
        .then(
          (rows) => rows[0]?.projectId ?? null,
          () => null,
        );
      projectOf.set(hostId, project);
    }
    void project.then((id) => {
      if (id === projectId) then();
    });
  };

  const onOperation = (e: OperationEvent) => {
    if (e.projectId === projectId) send(e.type, e);
  };
  const onReport = (e: NodeReportEvent) =>
    whenMine(e.hostId, () =>
      send("node.report", {
        hostId: e.hostId,
        clusterId: e.clusterId,
        status: e.report.status,
        apiResponding: e.apiResponding,
        phases: e.report.phases,
        ...(e.etcd ? { etcd: e.etcd } : {}),
      }),
    );
  const onLink = (e: NodeLinkEvent) =>
    whenMine(e.hostId, () => send(e.connected ? "node.connected" : "node.disconnected", { hostId: e.hostId }));
  const onAgent = (e: NodeAgentEvent) =>
    whenMine(e.hostId, () => {
      const { type: _t, ...rest } = e;
      send("node.agent", rest);
    });

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
