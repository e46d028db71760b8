import { randomUUID } from "node:crypto";
import { clusters, firstRow, nodes } from "@keelson/db";
import type { CommandPayload } from "@keelson/protocol";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkQuorum } from "../src/domain/clusters/membership/detach.ts";
import { type Fleet, m, startFleet, w, waitFor } from "./membership-harness.ts";
import { insertHost } from "./node-fixtures.ts";

type LeavePayload = CommandPayload<"node.leave">;

let f: Fleet;
beforeAll(async () => {
  f = await startFleet(40, { namePrefix: "det" });
});
afterAll(() => f.close());

let nextAgent = 0;
function agents(n: number): string[] {
  const ids = Array.from({ length: n }, (_, i) => f.id(nextAgent + i));
  nextAgent += n;
  if (nextAgent > f.sim.agents.length) throw new Error("fleet too small for the tests");
  return ids;
}
const agentOf = (hostId: string) => f.sim.agents.find((a) => a.hostId === hostId) as Fleet["sim"]["agents"][number];
let clusterCount = 0;

/** A cluster with these nodes attached and ok. */
async function clusterWith(masters: string[], workers: string[] = []): Promise<string> {
  const id = await f.createCluster(`det-${++clusterCount}`);
  for (const [i, master] of masters.entries()) {
    // Several masters in one request only while there are none; then one per request.
    const res = await f.attach(id, i === 0 ? [m(master), ...workers.map(w)] : [m(master)]);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
  }
  expect(await f.cluster(id)).toMatchObject({ status: "ok", numMasters: masters.length, numWorkers: workers.length });
  return id;
}

const nodeRow = async (hostId: string) => firstRow(await f.t.db.select().from(nodes).where(eq(nodes.id, hostId)));

async function failNode(hostId: string): Promise<void> {
  agentOf(hostId).setFailPhase("kubelet");
  await waitFor(`${hostId} failed`, async () => (await nodeRow(hostId))?.status === "failed");
}

async function expectRefused(
  clusterId: string,
  body: { uuid: string; isMaster: boolean }[],
  status: number,
  expected: Record<string, unknown>,
): Promise<string> {
  const before = decided(await f.snapshot());
  const sent = f.sent.length;
  const res = await f.detach(clusterId, body);
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json()).toMatchObject(expected);
  expect(decided(await f.snapshot())).toEqual(before);
  expect(f.sent.length).toBe(sent);
  return res.json().message as string;
}

/**
 * What a detach decides (memberships, the clusters' task, operations), without the statuses
 * that agents' reports and the health follower keep writing meanwhile: a failed node's later
 * reports move its status, and its cluster's, after failNode returns.
 */
function decided(snapshot: unknown): unknown {
  const {
    nodes: rows,
    clusters: cs,
    ...rest
  } = snapshot as {
    nodes: { status: unknown }[];
    clusters: { status: unknown }[];
  };
  const withoutStatus = ({ status: _s, ...row }: { status: unknown }) => row;
  return { ...rest, nodes: rows.map(withoutStatus), clusters: cs.map(withoutStatus) };
}

describe("detach rules: every violation is refused and changes nothing", () => {
  let a: string;
  let b: string;
  let free: string;
  let master: string;
  let worker1: string;
  let worker2: string;
  let other: string;

  beforeAll(async () => {
    [master, worker1, worker2, other, free] = agents(5) as [string, string, string, string, string];
    a = await clusterWith([master], [worker1, worker2]);
    b = await clusterWith([other]);
  });

  it("answers 400/404 naming the entry and the rule", async () => {
    const foreign = (await insertHost(f.t.db, f.t.otherProjectId, { name: "foreign", agentConnected: 1 })).id;
    await expectRefused(a, [w(worker1), w(randomUUID())], 404, { field: "[1].uuid", code: "not_found" });
    await expectRefused(a, [w(foreign)], 404, { field: "[0].uuid", code: "not_found" });
    await expectRefused(a, [w(worker1), w(worker1)], 400, { field: "[1].uuid", code: "duplicate_node" });
    expect(await expectRefused(a, [w(free)], 400, { field: "[0].uuid", code: "not_in_cluster" })).toContain(free);
    expect(
      await expectRefused(a, [w(worker1), m(other)], 400, { field: "[1].uuid", code: "not_in_cluster" }),
    ).toContain(`it is in cluster ${b}`);
    expect(await expectRefused(a, [w(master)], 400, { field: "[0].uuid", code: "role_mismatch" })).toMatch(
      /is a master of this cluster, not a worker/,
    );
    await expectRefused(a, [m(worker2)], 400, { field: "[0].uuid", code: "role_mismatch" });
    const unknownCluster = await f.detach(randomUUID(), [w(worker1)]);
    expect(unknownCluster.statusCode).toBe(404);
    const empty = await f.detach(a, []);
    expect(empty.statusCode).toBe(400);
  });

  it("refuses to leave workers without a master (409), unless every node goes", async () => {
    const message = await expectRefused(a, [m(master)], 409, { code: "quorum_loss" });
    expect(message).toMatch(/without a master/);
    await expectRefused(a, [m(master), w(worker1)], 409, { code: "quorum_loss" });
  });

  it("refuses with 409 while an earlier detach of the node is still running", async () => {
    const [mm, ww] = agents(2) as [string, string];
    const id = await clusterWith([mm], [ww]);
    await agentOf(ww).stop(); // the leave waits for the agent to come back
    expect((await f.detach(id, [w(ww)])).statusCode).toBe(200);
    await waitFor("leave pending", async () => (await f.latestOperation(id)).state === "running");
    await expectRefused(id, [w(ww)], 409, { code: "already_detaching" });
    expect(await agentOf(ww).connect()).toBe(true);
    await f.idle();
    expect(await nodeRow(ww)).toMatchObject({ clusterId: null, status: "ok" });
  });
});

describe("etcd quorum on detach", () => {
  it("keeps a healthy majority of the remaining masters", async () => {
    const [m1, m2, m3] = agents(3) as [string, string, string];
    const id = await clusterWith([m1, m2, m3]);
    await failNode(m3);
    // 3 masters, m3 failed: removing a healthy one leaves 1 healthy of 2.
    const message = await expectRefused(id, [m(m1)], 409, { code: "quorum_loss" });
    expect(message).toMatch(/would lose etcd quorum: 1 of the 2 remaining masters are healthy/);
    // Removing the failed one leaves 2 healthy of 2: allowed.
    const res = await f.detach(id, [m(m3)]);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({
      status: "ok",
      numMasters: 2,
      masterStatus: "healthy",
      taskStatus: "success",
    });
    agentOf(m3).failPhase = undefined;
  });

  it("refuses any master removal when etcd has no quorum now, but lets the whole cluster go", async () => {
    const [m1, m2, m3] = agents(3) as [string, string, string];
    const id = await clusterWith([m1, m2, m3]);
    await failNode(m2);
    await failNode(m3);
    const message = await expectRefused(id, [m(m3)], 409, { code: "quorum_loss" });
    expect(message).toMatch(/no quorum now \(1 of 3 masters healthy\)/);
    const res = await f.detach(id, [m(m1), m(m2), m(m3)]);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({ status: "pending", numMasters: 0, taskStatus: "success" });
    for (const hostId of [m2, m3]) agentOf(hostId).failPhase = undefined;
  });

  it("lets two of three healthy masters go at once (one left, healthy)", async () => {
    const [m1, m2, m3] = agents(3) as [string, string, string];
    const id = await clusterWith([m1, m2, m3]);
    expect((await f.detach(id, [m(m2), m(m3)])).statusCode).toBe(200);
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({ status: "ok", numMasters: 1, masterStatus: "healthy" });
  });

  it("states the rule on plain rows (unit)", () => {
    const node = (id: string, isMaster: number, healthy = true) => ({
      id,
      name: id,
      isMaster,
      status: healthy ? "ok" : "failed",
      agentConnected: 1,
      apiResponding: healthy ? 1 : 0,
    });
    const five = [node("a", 1), node("b", 1), node("c", 1), node("d", 1, false), node("e", 1, false)];
    // 5 masters, 3 healthy: removing the two unhealthy ones leaves 3 of 3.
    expect(() => checkQuorum(five, { masters: ["d", "e"], workers: [] })).not.toThrow();
    // Removing one healthy one leaves 2 healthy of 4: no majority.
    expect(() => checkQuorum(five, { masters: ["a"], workers: [] })).toThrow(/would lose etcd quorum/);
    // Workers alone never touch etcd.
    expect(() => checkQuorum([...five, node("w", 0)], { masters: [], workers: ["w"] })).not.toThrow();
    // Everything at once: always.
    expect(() => checkQuorum(five, { masters: ["a", "b", "c", "d", "e"], workers: [] })).not.toThrow();
  });
});

describe("the detach operation", () => {
  it("takes workers out first, then masters one at a time, and returns the nodes clean and unattached", async () => {
    const [m1, m2, w1, w2] = agents(4) as [string, string, string, string];
    const id = await clusterWith([m1, m2], [w1, w2]);
    const from = f.sent.length;
    const res = await f.detach(id, [m(m1), w(w1), m(m2), w(w2)]);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe("");
    expect(await f.cluster(id)).toMatchObject({ lastOp: "detach", taskStatus: "updating" });
    expect(await f.latestOperation(id)).toMatchObject({
      kind: "cluster.detach",
      params: { masters: [m1, m2], workers: [w1, w2] },
    });
    await f.idle();

    const leaves = f.sent.slice(from).filter((c) => c.name === "node.leave");
    expect(new Set(leaves.slice(0, 2).map((c) => c.hostId))).toEqual(new Set([w1, w2]));
    expect(leaves.slice(2).map((c) => c.hostId)).toEqual([m1, m2]);
    expect(leaves.map((c) => (c.payload as LeavePayload).lastNode)).toEqual([false, false, false, true]);
    expect(leaves.every((c) => (c.payload as LeavePayload).clusterId === id)).toBe(true);

    for (const hostId of [m1, m2, w1, w2]) {
      expect(await f.node(hostId)).toMatchObject({
        clusterUuid: null,
        clusterName: null,
        isMaster: 0,
        status: "ok",
        api_responding: 0,
      });
      expect((await f.node(hostId, "v3")).actualKubeRoleVersion).toBe("");
      expect((await nodeRow(hostId))?.phases).toEqual([]);
      expect(agentOf(hostId).membership).toBeUndefined();
    }
    expect(await f.cluster(id)).toMatchObject({
      status: "pending",
      taskStatus: "success",
      lastOp: "detach",
      numMasters: 0,
      numWorkers: 0,
      masterStatus: "",
      workerStatus: "",
    });

    // Unattached nodes may join another cluster (spec §3).
    const next = await f.createCluster(`det-again-${clusterCount}`);
    expect((await f.attach(next, [m(m1), w(w1)])).statusCode).toBe(200);
    await f.idle();
    expect(await f.cluster(next)).toMatchObject({ status: "ok", numMasters: 1, numWorkers: 1 });
  });

  it("asks a remaining master to sweep once workers left (their Nodes go at once), not when all go", async () => {
    const [m1, w1, w2] = agents(3) as [string, string, string];
    const id = await clusterWith([m1], [w1, w2]);
    const from = f.sent.length;
    expect((await f.detach(id, [w(w1)])).statusCode).toBe(200);
    await f.idle();
    expect(f.sent.slice(from).map((c) => `${c.name} ${c.hostId}`)).toEqual([`node.leave ${w1}`, `node.sweep ${m1}`]);
    expect(agentOf(m1).sweeps).toBe(1);

    const all = f.sent.length;
    expect((await f.detach(id, [w(w2), m(m1)])).statusCode).toBe(200);
    await f.idle();
    expect(f.sent.slice(all).map((c) => `${c.name} ${c.hostId}`)).toEqual([`node.leave ${w2}`, `node.leave ${m1}`]);
    expect(await f.cluster(id)).toMatchObject({ numMasters: 0, numWorkers: 0, taskStatus: "success" });
  });

  it("detaches through PUT nodes/{uuid} {clusterUuid: null}, by the same rules", async () => {
    const [mm, ww, loose] = agents(3) as [string, string, string];
    const id = await clusterWith([mm], [ww]);
    const put = (hostId: string, payload: unknown) =>
      f.t.request({ method: "PUT", url: `/v4/${f.t.projectId}/nodes/${hostId}`, payload: payload as object });

    const before = await f.snapshot();
    const quorum = await put(mm, { clusterUuid: null });
    expect(quorum.statusCode).toBe(409);
    expect(quorum.json()).toMatchObject({ code: "quorum_loss" });
    for (const [payload, field] of [
      [{ clusterUuid: id }, "clusterUuid"],
      [{ clusterUuid: null, isMaster: 0 }, "isMaster"],
      [{}, "clusterUuid"],
    ] as const) {
      const res = await put(ww, payload);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ field, code: "only_cluster_can_change" });
      expect(res.json().message).toMatch(/only the node's cluster can be changed, and only cleared/);
    }
    expect(await f.snapshot()).toEqual(before);

    expect((await put(loose, { clusterUuid: null })).statusCode).toBe(200);
    const ok = await put(ww, { clusterUuid: null });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toBe("");
    await f.idle();
    expect(await f.node(ww)).toMatchObject({ clusterUuid: null, isMaster: 0, status: "ok" });
    expect(await f.cluster(id)).toMatchObject({ numWorkers: 0, numMasters: 1, status: "ok", lastOp: "detach" });
    // The last node of the cluster may go, and leaves as lastNode.
    const last = await f.t.request({
      method: "PUT",
      url: `/v3/${f.t.projectId}/nodes/${mm}`,
      payload: { clusterUuid: null },
    });
    expect(last.statusCode).toBe(200);
    await f.idle();
    expect(
      (f.sent.filter((c) => c.name === "node.leave" && c.hostId === mm).at(-1)?.payload as LeavePayload | undefined)
        ?.lastNode,
    ).toBe(true);
    expect(await f.cluster(id)).toMatchObject({ status: "pending", numMasters: 0 });
  });

  it("deleting a cluster detaches all its nodes first", async () => {
    const [mm, ww] = agents(2) as [string, string];
    const id = await clusterWith([mm], [ww]);
    const res = await f.t.request({ method: "DELETE", url: `/v4/${f.t.projectId}/clusters/${id}` });
    expect(res.statusCode).toBe(200);
    await f.idle();
    expect((await f.t.request({ url: `/v4/${f.t.projectId}/clusters/${id}` })).statusCode).toBe(404);
    expect(firstRow(await f.t.db.select().from(clusters).where(eq(clusters.id, id)))).toBeUndefined();
    for (const hostId of [mm, ww]) {
      expect(await f.node(hostId)).toMatchObject({ clusterUuid: null, status: "ok", isMaster: 0 });
      expect(agentOf(hostId).membership).toBeUndefined();
    }
    const leaves = f.sent.filter((c) => c.name === "node.leave" && (c.payload as LeavePayload).clusterId === id);
    expect(leaves.map((c) => [c.hostId, (c.payload as LeavePayload).lastNode])).toEqual([
      [ww, false],
      [mm, true],
    ]);
  });
});
