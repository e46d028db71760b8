import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, m, startFleet, waitFor } from "./membership-harness.ts";
import { openStream } from "./sse-client.ts";

describe("GET /v4/{project_uuid}/events", () => {
  let f: Fleet;
  beforeAll(async () => {
    f = await startFleet(1, { namePrefix: "ev" });
  });
  afterAll(async () => {
    await f.close();
  });

  it("streams the project's operation and node changes as named events, and nothing of other projects", async () => {
    const url = `${f.base}/v4/${f.t.projectId}/events`;
    const stream = await openStream(url, f.t.token);
    const other = await openStream(`${f.base}/v4/${f.t.otherProjectId}/events`, f.t.otherToken);
    try {
      expect(stream.contentType).toBe("text/event-stream; charset=utf-8");
      const clusterId = await f.createCluster("streamed");
      const finished = await waitFor("operation.finished", () =>
        stream.events.find((e) => e.event === "operation.finished" && e.data.targetId === clusterId),
      );
      expect(finished.data).toMatchObject({ projectId: f.t.projectId, state: "succeeded" });
      const names = stream.events.filter((e) => e.data.targetId === clusterId).map((e) => e.event);
      expect(names[0]).toBe("operation.started");
      expect(names.at(-1)).toBe("operation.finished");

      // A host's link drops and comes back: disconnected, connected, and what its agent says.
      // (The fleet's own first link events may reach the stream after it opened, while they are
      // being stored: only those after the operation count.)
      const since = (name: string) => () =>
        stream.events.find((e) => e.event === name && (e.id as number) > (finished.id as number));
      f.agent(0).kill();
      await waitFor("node.agent", since("node.agent"));
      // The agent's report follows its hello on the wire; wait for it rather than race it.
      await waitFor("node.report", since("node.report"));
      const nodeEvents = stream.events.filter(
        (e) => e.event.startsWith("node.") && (e.id as number) > (finished.id as number),
      );
      expect(nodeEvents.map((e) => e.event)).toEqual(
        expect.arrayContaining(["node.disconnected", "node.connected", "node.agent", "node.report"]),
      );
      expect(nodeEvents.every((e) => e.data.hostId === f.id(0))).toBe(true);
      expect(nodeEvents.find((e) => e.event === "node.agent")?.data).toMatchObject({
        agentVersion: "0.0.0-sim",
        agentStatus: "running",
      });
      expect(other.events).toEqual([]);

      // A master's reports carry its etcd member health.
      expect((await f.attach(clusterId, [m(f.id(0))])).statusCode).toBe(200);
      const etcd = await waitFor("a node.report with etcd", () =>
        stream.events.find((e) => e.event === "node.report" && e.data.etcd !== undefined),
      );
      expect(etcd.data.etcd).toMatchObject({ members: 1, healthy: 1 });
      await f.idle();
    } finally {
      stream.close();
      other.close();
    }
  });

  it("needs a token of the project, and drops its listeners when the client goes away", async () => {
    const url = `${f.base}/v4/${f.t.projectId}/events`;
    for (const token of [null, f.t.otherToken]) {
      const refused = await openStream(url, token);
      expect(refused.status).toBe(403);
      await waitFor("body", () => refused.body().includes("forbidden"));
    }
    // The events are recorded whether or not a stream is open (Last-Event-ID replays read
    // them), by one follower of the runner and the hub for every stream.
    const runnerEvents = f.t.app.keelson.runner.events;
    const fanout = f.t.app.keelson.projectEvents;
    const listeners = runnerEvents.listenerCount("event");
    const before = fanout.size;
    const stream = await openStream(url, f.t.token);
    const second = await openStream(url, f.t.token);
    expect(fanout.size).toBe(before + 2);
    expect(runnerEvents.listenerCount("event")).toBe(listeners);
    stream.close();
    second.close();
    await waitFor("streams dropped", () => fanout.size === before);
  });
});
