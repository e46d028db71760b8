import { randomUUID } from "node:crypto";
import { cloudProviders, clusters, firstRow, nodePools, nodes, operations } from "@keelson/db";
import type { CommandPayload } from "@keelson/protocol";
import { eq } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { simPhases } from "../../../test/sim/node.ts";
import { defaultServerSettings } from "../src/settings.ts";
import { type Fleet, m, type SentCommand, startFleet, w, waitFor } from "./membership-harness.ts";
import { insertHost } from "./node-fixtures.ts";

type JoinPayload = CommandPayload<"node.join">;

function joinOf(command: SentCommand | undefined): JoinPayload {
  if (!command) throw new Error("no such node.join was sent");
  return command.payload as JoinPayload;
}

let f: Fleet;
// 40 agents registered and linked: over the default 10 s once on a machine at load 15-20.
beforeAll(async () => {
  f = await startFleet(40, { namePrefix: "att" });
}, 60_000);
afterAll(() => f.close());

/** Hands out agents no other test has used: tests stay independent on one shared fleet. */
let nextAgent = 0;
function agents(n: number): string[] {
  const ids = Array.from({ length: n }, (_, i) => f.id(nextAgent + i));
  nextAgent += n;
  if (nextAgent > f.sim.agents.length) throw new Error("fleet too small for the tests");
  return ids;
}
const agentOf = (hostId: string) => f.sim.agents.find((a) => a.hostId === hostId) as Fleet["sim"]["agents"][number];

async function attachedCluster(name: string, masters: string[], workers: string[] = []): Promise<string> {
  const clusterId = await f.createCluster(name);
  const res = await f.attach(clusterId, [...masters.map(m), ...workers.map(w)]);
  expect(res.statusCode, res.body).toBe(200);
  await f.idle();
  return clusterId;
}

describe("attach rules: every violation is refused and changes nothing", () => {
  let clusterId: string;
  let free: string[];
  let busy: string;
  let offline: string;
  let foreign: string;

  beforeAll(async () => {
    [busy] = agents(1) as [string];
    free = agents(3);
    await attachedCluster("rules-busy", [busy]);
    clusterId = await f.createCluster("rules");
    // The snapshots compare rows: the create must have finished before the first one.
    await f.idle();
    offline = (await insertHost(f.t.db, f.t.projectId, { name: "offline-host", agentConnected: 0 })).id;
    foreign = (await insertHost(f.t.db, f.t.otherProjectId, { name: "foreign-host", agentConnected: 1 })).id;
  });

  const cases = () =>
    [
      ["an unknown node", [m(free[0] as string), m(randomUUID())], 404, "[1].uuid", "not_found"],
      ["another project's node", [m(foreign)], 404, "[0].uuid", "not_found"],
      [
        "a node listed twice",
        [m(free[0] as string), w(free[1] as string), w(free[0] as string)],
        400,
        "[2].uuid",
        "duplicate_node",
      ],
      ["a node whose agent is offline", [m(free[0] as string), w(offline)], 400, "[1].uuid", "node_offline"],
      ["a node already in a cluster", [m(free[0] as string), w(busy)], 400, "[1].uuid", "node_attached"],
      ["workers without any master", [w(free[0] as string), w(free[1] as string)], 400, "[0].uuid", "master_required"],
    ] as const;

  it("answers 400/404 naming the entry and the rule", async () => {
    for (const [what, body, status, field, code] of cases()) {
      const before = await f.snapshot();
      const joins = f.sent.length;
      for (const version of ["v4", "v3"]) {
        const res = await f.attach(clusterId, [...body], version);
        expect(res.statusCode, `${what} (${version}): ${res.body}`).toBe(status);
        expect(res.json(), what).toMatchObject({ field, code });
        const message = res.json().message as string;
        const named = body[Number(field.slice(1, field.indexOf("]")))]?.uuid as string;
        expect(message, what).toContain(named);
      }
      expect(await f.snapshot(), what).toEqual(before);
      expect(f.sent.length, what).toBe(joins);
    }
  });

  it("says what each rule is in its message", async () => {
    const offlineRes = await f.attach(clusterId, [m(offline)]);
    expect(offlineRes.json().message).toMatch(/not connected/);
    const busyRes = await f.attach(clusterId, [m(busy)]);
    expect(busyRes.json().message).toMatch(/already attached to cluster rules-busy/);
    const workersRes = await f.attach(clusterId, [w(free[0] as string)]);
    expect(workersRes.json().message).toMatch(/only once the cluster has a master, or together with masters/);
  });

  it("refuses malformed bodies with 400 and unknown or foreign clusters with 404/403", async () => {
    const before = await f.snapshot();
    for (const body of [[], [{ uuid: free[0] }], [{ isMaster: true }], {}, [{ uuid: free[0], isMaster: true, x: 1 }]]) {
      const res = await f.t.request({
        method: "POST",
        url: `/v4/${f.t.projectId}/clusters/${clusterId}/attach`,
        payload: body as object,
      });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
    }
    const unknown = await f.attach(randomUUID(), [m(free[0] as string)]);
    expect(unknown.statusCode).toBe(404);
    const foreignCluster = await f.t.request({
      method: "POST",
      url: `/v4/${f.t.otherProjectId}/clusters/${clusterId}/attach`,
      payload: [m(free[0] as string)],
    });
    expect(foreignCluster.statusCode).toBe(403);
    expect(await f.snapshot()).toEqual(before);
  });

  it("attaches only to manual-deploy clusters that are not being deleted", async () => {
    // An auto-deploy cluster (its provider is aws): there is no API to create one yet, so the row is written here.
    const providerId = randomUUID();
    const poolId = randomUUID();
    const awsCluster = randomUUID();
    const local = firstRow(await f.t.db.select().from(clusters).where(eq(clusters.id, clusterId)));
    await f.t.db
      .insert(cloudProviders)
      .values({ id: providerId, projectId: f.t.projectId, name: "aws-1", type: "aws" });
    await f.t.db
      .insert(nodePools)
      .values({ id: poolId, projectId: f.t.projectId, cloudProviderId: providerId, name: "aws-1" });
    await f.t.db.insert(clusters).values({
      ...(local as typeof clusters.$inferInsert),
      id: awsCluster,
      name: "on-aws",
      nodePoolId: poolId,
      cloudProviderId: providerId,
    });
    const before = await f.snapshot();
    const aws = await f.attach(awsCluster, [m(free[0] as string)]);
    expect(aws.statusCode).toBe(400);
    expect(aws.json()).toMatchObject({ code: "not_manual_deploy" });
    expect(aws.json().message).toMatch(/manual-deploy/);

    await f.t.db.update(clusters).set({ status: "deleting" }).where(eq(clusters.id, clusterId));
    const deleting = await f.attach(clusterId, [m(free[0] as string)]);
    await f.t.db.update(clusters).set({ status: "pending" }).where(eq(clusters.id, clusterId));
    expect(deleting.statusCode).toBe(409);
    expect(deleting.json()).toMatchObject({ code: "cluster_deleting" });
    expect(await f.snapshot()).toEqual(before);
  });

  it("takes several masters only while the cluster has none, then one master per request", async () => {
    const [a, b, c] = agents(3) as [string, string, string];
    const [x, y] = agents(2) as [string, string];
    const id = await attachedCluster("one-at-a-time", [a]);
    const before = await f.snapshot();
    const two = await f.attach(id, [m(b), m(c)]);
    expect(two.statusCode).toBe(400);
    expect(two.json()).toMatchObject({ field: "[1].uuid", code: "one_master_at_a_time" });
    expect(two.json().message).toMatch(/etcd grows by one member at a time/);
    expect(await f.snapshot()).toEqual(before);

    // Allowed: one more master; then workers alone (the cluster has masters).
    expect((await f.attach(id, [m(b)])).statusCode).toBe(200);
    await f.idle();
    expect((await f.attach(id, [w(x), w(y)])).statusCode).toBe(200);
    await f.idle();
    const cluster = await f.cluster(id);
    expect(cluster).toMatchObject({ numMasters: 2, numWorkers: 2, status: "ok", taskStatus: "success" });
  });
});

describe("the attach operation", () => {
  afterEach(() => {
    f.t.settings.nodeConvergeTimeoutMs = defaultServerSettings().nodeConvergeTimeoutMs;
    for (const a of f.sim.agents) {
      a.phaseTimeMs = 0;
    }
  });

  it("takes a cluster pending -> creating -> ok, and the cluster and node reads follow", async () => {
    const [master] = agents(1) as [string];
    agentOf(master).phaseTimeMs = 300;
    const id = await f.createCluster("lifecycle");
    expect(await f.cluster(id)).toMatchObject({
      status: "pending",
      numMasters: 0,
      numWorkers: 0,
      masterStatus: "",
      workerStatus: "",
    });

    const res = await f.attach(id, [m(master)]);
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe("");
    expect(await f.cluster(id)).toMatchObject({
      status: "creating",
      taskStatus: "creating",
      lastOp: "attach",
      numMasters: 1,
      masterStatus: "unhealthy",
    });
    expect(await f.node(master)).toMatchObject({
      clusterUuid: id,
      clusterName: "lifecycle",
      isMaster: 1,
      status: "converging",
      api_responding: 0,
    });
    expect(await f.latestOperation(id)).toMatchObject({
      kind: "cluster.attach",
      params: { masters: [master], workers: [] },
    });

    await f.idle();
    const cluster = await f.cluster(id);
    expect(cluster).toMatchObject({
      status: "ok",
      taskStatus: "success",
      taskError: "",
      lastOp: "attach",
      numMasters: 1,
      numWorkers: 0,
      masterStatus: "healthy",
      workerStatus: "",
    });
    expect(Date.parse(cluster.lastOk as string)).toBeGreaterThan(Date.now() - 60_000);
    expect(await f.node(master)).toMatchObject({ status: "ok", api_responding: 1, isMaster: 1 });
    const v3 = await f.node(master, "v3");
    expect(v3.actualKubeRoleVersion).toBe(cluster.kubeRoleVersion);
    expect(v3.clusterKubeRoleVersion).toBe(cluster.kubeRoleVersion);
    expect((await f.latestOperation(id)).state).toBe("succeeded");
    // The phase list is stored as reported and shown on the host record.
    const host = await f.t.request({ url: `/v1/hosts/${master}` });
    const phases = (host.json() as { phases: { id: string; state: string }[] }).phases;
    expect(phases).toHaveLength(21);
    expect(phases.filter((p) => p.state === "running")).toHaveLength(20);
  });

  it("joins masters one at a time, each listing the ok masters as etcd members, then the workers", async () => {
    const masters = agents(3);
    const workers = agents(2);
    // The cluster's proxy rides in every join's settings (the nodes' containerd uses it).
    const httpProxy = "http://proxy.example.com:3128";
    const id = await f.createCluster("three-masters", { httpProxy });
    const res = await f.attach(id, [w(workers[0] as string), ...masters.map(m), w(workers[1] as string)]);
    expect(res.statusCode).toBe(200);
    await f.idle();

    const joins = f.sent.filter((c) => c.name === "node.join" && (c.payload as JoinPayload).clusterId === id);
    expect(joins.map((c) => c.hostId)).toEqual([...masters, ...joins.slice(3).map((c) => c.hostId)]);
    expect(new Set(joins.slice(3).map((c) => c.hostId))).toEqual(new Set(workers));
    const ip = async (hostId: string) =>
      firstRow(await f.t.db.select().from(nodes).where(eq(nodes.id, hostId)))?.primaryIp as string;
    const members = (i: number) => joinOf(joins[i]).etcdMembers;
    expect(members(0)).toEqual([]);
    expect(members(1)).toEqual([
      {
        name: masters[0],
        peerUrl: `https://${await ip(masters[0] as string)}:2380`,
        clientUrl: `https://${await ip(masters[0] as string)}:2379`,
      },
    ]);
    // etcd takes its members in any order (the list is ordered by registration time).
    expect(new Set(members(2).map((e) => e.name))).toEqual(new Set([masters[0], masters[1]]));
    for (const join of joins.slice(3)) expect((join.payload as JoinPayload).etcdMembers).toEqual([]);

    const row = firstRow(await f.t.db.select().from(clusters).where(eq(clusters.id, id)));
    const first = joinOf(joins[0]);
    expect(first).toMatchObject({
      clusterId: id,
      clusterName: "three-masters",
      role: "master",
      kubeRoleVersion: row?.kubeRoleVersion,
      caCertPem: row?.caCertPem,
      apiEndpoint: `https://${await ip(masters[0] as string)}:443`,
    });
    expect(joinOf(joins[3]).role).toBe("worker");
    for (const join of joins) expect(joinOf(join).settings.httpProxy).toBe(httpProxy);

    expect(await f.cluster(id)).toMatchObject({
      status: "ok",
      taskStatus: "success",
      numMasters: 3,
      numWorkers: 2,
      masterStatus: "healthy",
      workerStatus: "healthy",
    });
    for (const hostId of workers) {
      expect(await f.node(hostId)).toMatchObject({ clusterUuid: id, isMaster: 0, status: "ok", api_responding: 0 });
    }
    const list = await f.t.request({ url: `/v4/${f.t.projectId}/clusters/${id}/nodes` });
    expect((list.json() as unknown[]).length).toBe(5);
  });

  it("asks a master to sweep at once when joining workers wait for their role label, coalesced", async () => {
    const [master] = agents(1) as [string];
    const workers = agents(3);
    const id = await attachedCluster("sweep-on-attach", [master]);
    for (const hostId of workers) agentOf(hostId).phaseTimeMs = 60_000;
    expect((await f.attach(id, workers.map(w))).statusCode).toBe(200);
    await waitFor("workers joined", async () =>
      workers.every((h) => agentOf(h).membership?.clusterId === id && agentOf(h).phases.length > 0),
    );
    expect(agentOf(master).sweeps).toBe(0);
    // Each worker reaches node-taints, where a real worker waits for a master to label it.
    for (const hostId of workers) {
      const agent = agentOf(hostId);
      agent.phases = simPhases("worker", "ok", new Date()).map((p) =>
        p.id === "node-taints" ? { ...p, state: "executing", finishedAt: null, durationMs: null } : p,
      );
      agent.sendReport();
    }
    await waitFor("a master sweep", async () => agentOf(master).sweeps > 0);
    for (const hostId of workers) {
      agentOf(hostId).phaseTimeMs = 5;
      agentOf(hostId).setFailPhase(undefined);
    }
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({ status: "ok", numWorkers: 3 });
    // Each worker asks once when it starts waiting; asks while a sweep runs share the one after it.
    const sweeps = f.sent.filter((c) => c.name === "node.sweep" && c.hostId === master);
    expect(sweeps.length).toBeGreaterThanOrEqual(1);
    expect(sweeps.length).toBeLessThanOrEqual(workers.length);
    expect(sweeps.every((c) => JSON.stringify(c.payload) === JSON.stringify({ clusterId: id }))).toBe(true);
    expect(agentOf(master).sweeps).toBe(sweeps.length);
  });

  it("points the kubeconfig at the first master's IP, the VIP or the external DNS name", async () => {
    const server = async (clusterId: string) => {
      const res = await f.t.request({ url: `/v4/${f.t.projectId}/kubeconfig/${clusterId}` });
      expect(res.statusCode, res.body).toBe(200);
      return (parseYaml(res.body) as { clusters: { cluster: { server: string } }[] }).clusters[0]?.cluster.server;
    };
    const [a, b, c] = agents(3) as [string, string, string];
    const plain = await attachedCluster("kc-plain", [a]);
    const ipOf = async (hostId: string) =>
      firstRow(await f.t.db.select().from(nodes).where(eq(nodes.id, hostId)))?.primaryIp;
    expect(await server(plain)).toBe(`https://${await ipOf(a)}:443`);

    const vip = await f.createCluster("kc-vip", { masterVipIpv4: "10.250.0.10", masterVipIface: "eth0" });
    expect((await f.attach(vip, [m(b)])).statusCode).toBe(200);
    await f.idle();
    expect(await server(vip)).toBe("https://10.250.0.10:443");
    expect(joinOf(f.joinsTo(b).at(-1)).apiEndpoint).toBe("https://10.250.0.10:443");

    const dns = await f.createCluster("kc-dns", { externalDnsName: "k8s.example.test", k8sApiPort: "6443" });
    expect((await f.attach(dns, [m(c)])).statusCode).toBe(200);
    await f.idle();
    expect(await server(dns)).toBe("https://k8s.example.test:6443");
  });

  it("fails with a taskError naming the node and its failed phase; the cluster follows when it recovers", async () => {
    const [master] = agents(1) as [string];
    const agent = agentOf(master);
    agent.failPhase = "kubelet";
    const id = await f.createCluster("failing");
    expect((await f.attach(id, [m(master)])).statusCode).toBe(200);
    await f.idle();
    const cluster = await f.cluster(id);
    expect(cluster).toMatchObject({
      status: "error",
      taskStatus: "error",
      lastOp: "attach",
      masterStatus: "unhealthy",
    });
    expect(cluster.taskError).toBe(
      `node ${agent.hostname} (${master}) failed in phase "Configure and start kubelet" (kubelet): simulated failure of phase kubelet`,
    );
    expect(await f.latestOperation(id)).toMatchObject({ state: "failed", error: cluster.taskError });
    expect(await f.node(master)).toMatchObject({ status: "failed", clusterUuid: id });
    const host = await f.t.request({ url: `/v1/hosts/${master}` });
    const phase = (host.json() as { phases: { id: string; state: string; lastError: string }[] }).phases.find(
      (p) => p.id === "kubelet",
    );
    expect(phase).toMatchObject({ state: "failed", lastError: "simulated failure of phase kubelet" });

    // Fixed on the host: the node converges and the idle cluster's status follows its nodes.
    agent.setFailPhase(undefined);
    await waitFor(
      "cluster ok",
      async () => firstRow(await f.t.db.select().from(clusters).where(eq(clusters.id, id)))?.status === "ok",
    );
    expect(await f.cluster(id)).toMatchObject({ status: "ok", masterStatus: "healthy", taskStatus: "error" });
  });

  it("reports failed workers without failing the cluster that has a healthy master", async () => {
    const [master, good, bad] = agents(3) as [string, string, string];
    agentOf(bad).failPhase = "kube-proxy";
    const id = await f.createCluster("bad-worker");
    expect((await f.attach(id, [m(master), w(good), w(bad)])).statusCode).toBe(200);
    await f.idle();
    const cluster = await f.cluster(id);
    expect(cluster).toMatchObject({
      status: "ok",
      taskStatus: "error",
      workerStatus: "unhealthy",
      masterStatus: "healthy",
    });
    expect(cluster.taskError).toContain(
      `node ${agentOf(bad).hostname} (${bad}) failed in phase "Configure and start kube-proxy"`,
    );
    expect(await f.node(good)).toMatchObject({ status: "ok" });
    agentOf(bad).failPhase = undefined;
  });

  it("gives up after KEELSON_NODE_CONVERGE_TIMEOUT_MS, saying where the node was", async () => {
    const [master] = agents(1) as [string];
    agentOf(master).phaseTimeMs = 3000;
    f.t.settings.nodeConvergeTimeoutMs = 300;
    const id = await f.createCluster("slow");
    expect((await f.attach(id, [m(master)])).statusCode).toBe(200);
    await f.idle();
    const cluster = await f.cluster(id);
    expect(cluster).toMatchObject({ taskStatus: "error", status: "error" });
    expect(cluster.taskError).toMatch(
      /did not converge within 0\.3 s: status converging; at phase gen-certs \(executing\)/,
    );
  });

  it("waits for an agent that is offline when its join is due, and joins it when it reconnects", async () => {
    const [master, worker] = agents(2) as [string, string];
    agentOf(master).phaseTimeMs = 300;
    const id = await f.createCluster("offline-worker");
    expect((await f.attach(id, [m(master), w(worker)])).statusCode).toBe(200);
    await agentOf(worker).stop();
    await waitFor(
      "master ok",
      async () => firstRow(await f.t.db.select().from(nodes).where(eq(nodes.id, master)))?.status === "ok",
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(f.joinsTo(worker)).toHaveLength(0);
    expect((await f.latestOperation(id)).state).toBe("running");
    expect(await agentOf(worker).connect()).toBe(true);
    await f.idle();
    expect(f.joinsTo(worker)).toHaveLength(1);
    expect(await f.cluster(id)).toMatchObject({
      status: "ok",
      taskStatus: "success",
      numWorkers: 1,
      workerStatus: "healthy",
    });
  });
});

describe("cluster create with masterNodes / workerNodes", () => {
  it("attaches them in the create transaction and joins them in the create operation", async () => {
    const [master, worker] = agents(2) as [string, string];
    const res = await f.t.request({
      method: "POST",
      url: `/v4/${f.t.projectId}/clusters`,
      payload: { name: "with-nodes", masterNodes: [master], workerNodes: [worker] },
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().uuid as string;
    expect(await f.latestOperation(id)).toMatchObject({ kind: "cluster.create" });
    expect(await f.node(master)).toMatchObject({ clusterUuid: id, isMaster: 1 });
    expect((await f.cluster(id)).status).toMatch(/creating|ok/);
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({
      status: "ok",
      taskStatus: "success",
      lastOp: "create",
      numMasters: 1,
      numWorkers: 1,
      masterStatus: "healthy",
      workerStatus: "healthy",
    });
    expect(f.joinsTo(master)).toHaveLength(1);
    expect(f.joinsTo(worker)[0]?.at).toBeGreaterThanOrEqual(f.joinsTo(master)[0]?.at as number);
  });

  it("applies the attach rules to the named nodes and creates nothing when one is broken", async () => {
    const [free, busy] = agents(2) as [string, string];
    await attachedCluster("create-busy", [busy]);
    const offline = (await insertHost(f.t.db, f.t.projectId, { name: "offline-2", agentConnected: 0 })).id;
    const cases = [
      [{ workerNodes: [free] }, "workerNodes[0]", "master_required"],
      [{ masterNodes: [offline] }, "masterNodes[0]", "node_offline"],
      [{ masterNodes: [free], workerNodes: [busy] }, "workerNodes[0]", "node_attached"],
      [{ masterNodes: [randomUUID()] }, "masterNodes[0]", "unknown_node"],
    ] as const;
    for (const [body, field, code] of cases) {
      const before = await f.snapshot();
      const res = await f.t.request({
        method: "POST",
        url: `/v4/${f.t.projectId}/clusters`,
        payload: { name: `create-${code}`, ...body },
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ field, code });
      expect(await f.snapshot()).toEqual(before);
    }
    expect(
      (await f.t.db.select().from(operations).where(eq(operations.kind, "cluster.create"))).length,
    ).toBeGreaterThan(0);
  });
});
