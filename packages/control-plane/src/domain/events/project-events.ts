import type { NodeAgentEvent, NodeEvents, NodeLinkEvent, NodeReportEvent } from "../../agents/node-events.ts";
import type { OperationRunner } from "../../runner/runner.ts";
import type { OperationEvent } from "../../runner/types.ts";

export type ProjectEventName =
  | OperationEvent["type"]
  | "node.report"
  | "node.connected"
  | "node.disconnected"
  | "node.agent";

/**
 * Called with each event of the followed project as its server-sent-events block
 * (`event: <name>\ndata: <json>\n\n`), the same string for every follower of the project.
 */
export type ProjectEventSink = (block: string) => void;

/**
 * The project event streams of one control plane: follows the runner's operation events and
 * the hub's node events once, for every stream together, and hands each event to the streams
 * of its project. An event is serialised once however many streams follow its project, and an
 * event of a project nobody follows costs a map lookup: 1,000 streams during a 1,000-node
 * rollout cost one JSON encoding per event and one write per stream. Node events carry their
 * host's project (from its credential), so no event waits for the database. The sources are
 * followed only while a stream is open.
 */
export class ProjectEventFanout {
  private readonly byProject = new Map<string, Set<ProjectEventSink>>();
  private followers = 0;

  constructor(
    private readonly runnerEvents: OperationRunner["events"],
    private readonly nodeEvents: NodeEvents["all"],
  ) {}

  /** Follows one project until the returned function is called (when the client goes away). */
  follow(projectId: string, sink: ProjectEventSink): () => void {
    let sinks = this.byProject.get(projectId);
    if (!sinks) {
      sinks = new Set();
      this.byProject.set(projectId, sinks);
    }
    sinks.add(sink);
    if (this.followers++ === 0) this.listen();
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      const current = this.byProject.get(projectId);
      current?.delete(sink);
      if (current?.size === 0) this.byProject.delete(projectId);
      if (--this.followers === 0) this.unlisten();
    };
  }

  /** Streams open (tests). */
  get size(): number {
    return this.followers;
  }

  private deliver(projectId: string, name: ProjectEventName, data: () => unknown): void {
    const sinks = this.byProject.get(projectId);
    if (!sinks) return;
    const block = `event: ${name}\ndata: ${JSON.stringify(data())}\n\n`;
    for (const sink of sinks) sink(block);
  }

  private readonly onOperation = (e: OperationEvent): void => this.deliver(e.projectId, e.type, () => e);

  private readonly onReport = (e: NodeReportEvent): void =>
    this.deliver(e.projectId, "node.report", () => ({
      hostId: e.hostId,
      clusterId: e.clusterId,
      status: e.report.status,
      apiResponding: e.apiResponding,
      phases: e.report.phases,
      ...(e.etcd ? { etcd: e.etcd } : {}),
    }));

  private readonly onLink = (e: NodeLinkEvent): void =>
    this.deliver(e.projectId, e.connected ? "node.connected" : "node.disconnected", () => ({ hostId: e.hostId }));

  private readonly onAgent = (e: NodeAgentEvent): void =>
    this.deliver(e.projectId, "node.agent", () => {
      const { type: _t, projectId: _p, ...rest } = e;
      return rest;
    });

  private listen(): void {
    this.runnerEvents.on("event", this.onOperation);
    this.nodeEvents.on("node-report", this.onReport);
    this.nodeEvents.on("link", this.onLink);
    this.nodeEvents.on("agent", this.onAgent);
  }

  private unlisten(): void {
    this.runnerEvents.off("event", this.onOperation);
    this.nodeEvents.off("node-report", this.onReport);
    this.nodeEvents.off("link", this.onLink);
    this.nodeEvents.off("agent", this.onAgent);
  }
}
