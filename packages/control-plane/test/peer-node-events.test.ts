import { AGENT_CAPABILITIES } from "@keelson/protocol";
import { afterEach, describe, expect, it, vi } from "vitest";
import { registerFleet, type SimAgent, simPhases } from "../../../test/sim/index.ts";
import type { AgentHub } from "../src/agents/hub.ts";
import { nodeEventOf, nodeEventRecord, payloadHost } from "../src/agents/node-event-records.ts";
import type { NodeEvent } from "../src/agents/node-events.ts";
import { peerNodeEvents } from "../src/agents/peer-node-events.ts";
import { sweepNow } from "../src/domain/clusters/membership/sweep.ts";
import { ADMIN_TOKEN, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { agentOn, listening, twoReplicas, until } from "./replica-fixtures.ts";

const phases = simPhases("master", "converging", new Date("2026-11-26T10:00:00.000Z"));

describe("a node event's stored form", () => {
  const stored = (e: NodeEvent) => {
    const { type, payload } = nodeEventRecord(e);
    return { projectId: e.projectId, type, payload };
  };
  const base = { hostId: "h1", projectId: "p1" };

  it("reads back as the event it was, for every kind and each optional field", () => {
    const events: NodeEvent[] = [
      {
        type: "node-report",
        ...base,
        clusterId: "c1",
        report: { status: "converging", phases },
        apiResponding: false,
        namesCommands: false,
      },
      {
        type: "node-report",
        ...base,
        clusterId: null,
        report: { status: "ok", phases: [] },
        apiResponding: true,
        etcd: { members: 3, healthy: 2, checkedAt: "2026-11-26T10:00:01.000Z" },
        namesCommands: true,
      },
      {
        type: "node-report",
        ...base,
        clusterId: "c1",
        report: { status: "ok", phases: [] },
        apiResponding: true,
        namesCommands: true,
        command: "op-1:restart:h1",
      },
      { type: "link", ...base, connected: true },
      { type: "link", ...base, connected: false },
      { type: "agent", ...base, agentVersion: "1.2.3", agentStatus: "updating", agentError: null },
    ];
    for (const e of events) expect(nodeEventOf(stored(e))).toEqual(e);
    // Spliced around the phases' text made once (phasesJson), a payload is still JSON.stringify's form.
    for (const e of events) expect(JSON.stringify(JSON.parse(stored(e).payload))).toBe(stored(e).payload);
    // Each names its host first, where payloadHost reads it without parsing.
    for (const e of events) expect(payloadHost(stored(e).payload)).toBe(e.hostId);
  });

  it("names its host without parsing only where the text is the id", () => {
    expect(payloadHost('{"hostId":"9b2c-h","status":"ok"}')).toBe("9b2c-h");
    // An escape in the id, another form, a cut payload: read in full instead.
    expect(payloadHost(JSON.stringify({ hostId: 'a"b', status: "ok" }))).toBeUndefined();
    expect(payloadHost(JSON.stringify({ clusterId: "c1", hostId: "h1" }))).toBeUndefined();
    expect(payloadHost('{"hostId":"h1')).toBeUndefined();
  });

  it("reaches this replica's waiters as before, other hosts' rows passed over before JSON.parse", () => {
    const emitted: NodeEvent[] = [];
    const waited = new Set(["h1", 'a"b', "linked-here"]);
    const hub = {
      nodeEvents: {
        listenedHosts: waited.size,
        listened: (h: string) => waited.has(h),
        emitFromPeer: (e: NodeEvent) => emitted.push(e),
      },
      linkedHere: (h: string) => h === "linked-here",
    } as unknown as AgentHub;
    const sink = peerNodeEvents(hub);
    const link = (hostId: string): NodeEvent => ({ type: "link", hostId, projectId: "p1", connected: true });
    const parse = vi.spyOn(JSON, "parse");
    try {
      for (const h of ["other-1", "other-2", "linked-here"]) sink.deliver(stored(link(h)));
      sink.deliver({ projectId: "p1", type: "operation.step", payload: '{"hostId":"h1"}' });
      expect(parse).not.toHaveBeenCalled();
      expect(emitted).toEqual([]);
      sink.deliver(stored(link("h1")));
      sink.deliver(stored(link('a"b')));
      expect(emitted).toEqual([link("h1"), link('a"b')]);
    } finally {
      parse.mockRestore();
    }
  });

  it("keeps the stream's fields: no namesCommands, and command only from an agent that names it", () => {
    const report = { type: "node-report", ...base, clusterId: "c1", apiResponding: true } as const;
    const older = nodeEventRecord({ ...report, report: { status: "ok", phases: [] }, namesCommands: false });
    const data = { hostId: "h1", clusterId: "c1", status: "ok", apiResponding: true, phases: [] };
    expect(older).toEqual({ type: "node.report", payload: JSON.stringify(data) });
    const naming = nodeEventRecord({ ...report, report: { status: "ok", phases: [] }, namesCommands: true });
    expect(naming.payload).toBe(JSON.stringify({ ...data, command: null }));
    // Every field, in the stream's order.
    const etcd = { members: 3, healthy: 3, checkedAt: "2026-11-26T10:00:01.000Z" };
    const full = nodeEventRecord({
      ...report,
      report: { status: "converging", phases },
      etcd,
      namesCommands: true,
      command: "op-1:restart:h1",
    });
    expect(full.payload).toBe(
      JSON.stringify({ ...data, status: "converging", phases, etcd, command: "op-1:restart:h1" }),
    );
  });

  it("is nothing for another kind of event, bad JSON or a form not known here", () => {
    const row = (type: string, payload: string) => ({ projectId: "p1", type, payload });
    expect(nodeEventOf(row("operation.step", '{"hostId":"h1"}'))).toBeUndefined();
    expect(nodeEventOf(row("node.report", "{"))).toBeUndefined();
    expect(nodeEventOf(row("node.report", '{"hostId":"h1","status":"ok"}'))).toBeUndefined();
    expect(
      nodeEventOf(
        row(
          "node.report",
          JSON.stringify({ hostId: "h1", clusterId: null, status: "ok", apiResponding: true, phases: [], command: 7 }),
        ),
      ),
    ).toBeUndefined();
    expect(nodeEventOf(row("node.connected", '{"host":"h1"}'))).toBeUndefined();
    expect(nodeEventOf(row("node.agent", '{"hostId":"h1","agentVersion":"1"}'))).toBeUndefined();
  });
});

let apps: TestApp[] = [];
let agents: SimAgent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop();
  // B first: it keeps the shared data, A removes it.
  for (const t of apps.splice(0).reverse()) await t.close();
});

// SQLite serves one replica: its events are never read back from the table (project-events.ts).
describe.runIf(TEST_DIALECT === "postgres")("operations on one replica, hosts linked to another", () => {
  it("attach and a staggered restart run on A finish while their master reports only to B", async () => {
    const [a, b] = await twoReplicas({}, { bRunsOperations: false });
    apps = [a, b];
    const onA = await listening(a);
    const onB = await listening(b);
    const ids = await registerFleet(onA.base, ["worker-1", "worker-2"], {
      adminToken: ADMIN_TOKEN,
      projectId: a.projectId,
    });
    const [masterId, workerId] = ids as [(typeof ids)[0], (typeof ids)[0]];
    // The master on B, the worker on A: spread, as agents picking a replica at random are.
    const master = agentOn(onB.link, masterId, { phaseTimeMs: 20 }, 1);
    const worker = agentOn(onA.link, workerId, { phaseTimeMs: 20 }, 2);
    agents = [master, worker];
    expect(await master.connect(10_000)).toBe(true);
    expect(await worker.connect(10_000)).toBe(true);
    await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(masterId.hostId));
    expect(a.app.keelson.agents.linkedHere(masterId.hostId)).toBe(false);

    const created = await a.request({
      method: "POST",
      url: `/v4/${a.projectId}/clusters`,
      payload: { name: "spread" },
    });
    expect(created.statusCode, created.body).toBe(200);
    const clusterId = created.json().uuid as string;
    const attach = await a.request({
      method: "POST",
      url: `/v4/${a.projectId}/clusters/${clusterId}/attach`,
      payload: [
        { uuid: masterId.hostId, isMaster: true },
        { uuid: workerId.hostId, isMaster: false },
      ],
    });
    expect(attach.statusCode, attach.body).toBe(200);
    await a.app.keelson.runner.idle();
    const cluster = async () =>
      (await a.request({ method: "GET", url: `/v4/${a.projectId}/clusters/${clusterId}` })).json();
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success" });
    // A knows what the master's agent declared to B, so its sweep reaches that master through B.
    expect(a.app.keelson.agents.supports(masterId.hostId, AGENT_CAPABILITIES.nodeSweep)).toBe(true);
    const swept = master.sweeps;
    expect(await sweepNow(a.app.keelson, a.db, clusterId, a.app.log)).toBeDefined();
    expect(master.sweeps).toBe(swept + 1);

    const restart = await a.request({ method: "POST", url: `/v3/${a.projectId}/clusters/${clusterId}/restart` });
    expect(restart.statusCode, restart.body).toBe(200);
    await a.app.keelson.runner.idle();
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success" });
    // Both nodes restarted once, the master's through B's link (B runs no operations: both ran on A).
    expect(master.restarts).toBe(1);
    expect(worker.restarts).toBe(1);
    // B's reports of the master reached A's book; B's own waiters had none to hear.
    expect(a.app.keelson.agents.nodeEvents.listenedHosts).toBe(0);
  }, 30_000);
});
