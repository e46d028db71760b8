import type { AddressInfo } from "node:net";
import { firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { agentShelf } from "../src/domain/packages/agent-shelf.ts";
import { fakeAgentPackage, sha256 } from "./agent-package-fixtures.ts";
import { createTestApp } from "./helpers.ts";
import { type Fleet, fleetOf, m, recordCommands, startFleet, w, waitFor } from "./membership-harness.ts";

const VERSION = "2.0.0-up";
const pkg = fakeAgentPackage(VERSION);

async function fleetWithPackage(count: number): Promise<Fleet> {
  const f = await startFleet(count, { namePrefix: "up" });
  await agentShelf(f.t.app.keelson).storeBytes(pkg);
  return f;
}

const upgrade = (f: Fleet, body: Record<string, unknown>, token?: string) =>
  f.t.request({
    method: "POST",
    url: `/v4/${f.t.projectId}/hostAgentUpgrades`,
    payload: body,
    ...(token ? { token } : {}),
  });

const operation = async (f: Fleet, id: string) =>
  firstRow(await f.t.db.select().from(operations).where(eq(operations.id, id)));

let fleets: Fleet[] = [];
afterEach(async () => {
  for (const f of fleets) await f.close().catch(() => undefined);
  fleets = [];
});

describe("host-agent upgrades as an operation", () => {
  it("upgrades batch by batch from the served package, never two masters of a cluster together", async () => {
    const f = await fleetWithPackage(4);
    fleets.push(f);
    const [a, b, c, d] = [f.id(0), f.id(1), f.id(2), f.id(3)];
    const clusterId = await f.createCluster("up");
    expect((await f.attach(clusterId, [m(a), m(b), w(c)])).statusCode).toBe(200);
    await f.idle();
    // Each host's first hello at the new version, to order batches by.
    const backAt = new Map<string, number>();
    f.t.app.keelson.agents.nodeEvents.all.on("agent", (e) => {
      if (e.agentVersion === VERSION && e.agentStatus === "running" && !backAt.has(e.hostId))
        backAt.set(e.hostId, Date.now());
    });

    // The package URL given to agents is the address the request came to (its Host header).
    const { port } = f.t.app.server.address() as AddressInfo;
    const reply = await f.t.request({
      method: "POST",
      url: `/v4/${f.t.projectId}/hostAgentUpgrades`,
      headers: { host: `127.0.0.1:${port}` },
      payload: { version: VERSION, hosts: [a, b, c, d], batchSize: 2 },
    });
    const res = { statusCode: reply.statusCode, json: reply.json() as Record<string, unknown> };
    expect(res.statusCode, JSON.stringify(res.json)).toBe(200);
    // a and b are masters of one cluster: b waits for the second batch, and c moves up.
    expect(res.json.batches).toEqual([
      [a, c],
      [b, d],
    ]);
    await f.idle();
    const op = await operation(f, res.json.operationId as string);
    expect(op).toMatchObject({ kind: "hosts.upgrade", state: "succeeded", error: null });

    const sent = f.sent.filter((s) => s.name === "agent.upgrade");
    expect(sent.map((s) => s.hostId).sort()).toEqual([a, b, c, d].sort());
    for (const s of sent) {
      expect(s.payload).toEqual({
        name: "keelson-agent",
        version: VERSION,
        url: `http://127.0.0.1:${port}/v1/agentPackages/${VERSION}/package.tar.gz`,
        sha256: sha256(pkg),
      });
    }
    // The second batch was asked only after both hosts of the first were back at the version.
    const firstBack = Math.max(backAt.get(a) ?? Number.NaN, backAt.get(c) ?? Number.NaN);
    const secondAsked = Math.min(...sent.filter((s) => s.hostId === b || s.hostId === d).map((s) => s.at));
    expect(secondAsked).toBeGreaterThanOrEqual(firstBack);
    for (let i = 0; i < 4; i++) {
      expect(f.agent(i).agentVersion).toBe(VERSION);
      expect(f.agent(i).agentUpgrades).toBe(1);
    }
    // Once the operation says done, the host records say so too (no presence batch pending).
    const hosts = (await f.t.request({ method: "GET", url: "/v1/hosts" })).json() as {
      host_agent: { version: string; status: string };
    }[];
    expect(hosts.map((h) => h.host_agent)).toEqual(Array(4).fill({ version: VERSION, status: "running" }));
  });

  it("stops at a host that fails and reports it; later hosts are never touched", async () => {
    const f = await fleetWithPackage(3);
    fleets.push(f);
    f.agent(1).upgradeFailure = "checksum mismatch";
    const res = await upgrade(f, { version: VERSION, hosts: [f.id(0), f.id(1), f.id(2)] });
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const op = await operation(f, res.json().operationId);
    expect(op?.state).toBe("failed");
    expect(op?.error).toContain(`host ${f.id(1)}: upgrade to ${VERSION} failed: checksum mismatch`);
    expect(f.agent(0).agentVersion).toBe(VERSION);
    expect(f.agent(1).agentVersion).toBe("0.0.0-sim");
    expect(f.agent(2).agentUpgrades).toBe(0);
  });

  it("fails a host that does not come back within KEELSON_HOST_UPGRADE_TIMEOUT_MS", async () => {
    const f = await fleetWithPackage(2);
    f.t.settings.hostUpgradeTimeoutMs = 300;
    fleets.push(f);
    f.agent(0).upgradeTimeMs = 60_000;
    const res = await upgrade(f, { version: VERSION, hosts: [f.id(0), f.id(1)] });
    await f.idle();
    const op = await operation(f, res.json().operationId);
    expect(op?.state).toBe("failed");
    expect(op?.error).toContain(`host ${f.id(0)} did not come back running at ${VERSION} in time`);
    expect(f.agent(1).agentUpgrades).toBe(0);
  });

  it("a cluster rollout and a host-agent upgrade of its nodes exclude each other: the second gets 409", async () => {
    const f = await fleetWithPackage(4);
    fleets.push(f);
    const [a, b, c, d] = [f.id(0), f.id(1), f.id(2), f.id(3)];
    const clusterId = await f.createCluster("excl");
    expect((await f.attach(clusterId, [m(a), w(b)])).statusCode).toBe(200);
    const other = await f.createCluster("excl-other");
    expect((await f.attach(other, [m(c), w(d)])).statusCode).toBe(200);
    await f.idle();
    const restart = (id: string) =>
      f.t.request({ method: "POST", url: `/v3/${f.t.projectId}/clusters/${id}/restart`, payload: {} });

    // A restart in progress keeps its nodes' agents where they are.
    f.agent(0).phaseTimeMs = 300;
    expect((await restart(clusterId)).statusCode).toBe(200);
    const busy = await upgrade(f, { version: VERSION, hosts: [c, b] });
    expect(busy.statusCode).toBe(409);
    expect(busy.json()).toMatchObject({ code: "cluster_busy", message: expect.stringContaining(clusterId) });
    await f.idle();
    expect(f.agent(1).agentUpgrades).toBe(0);

    // An agent rollout in progress keeps the clusters of its hosts from a restart or upgrade;
    // a cluster none of whose nodes it upgrades is free.
    f.agent(1).upgradeTimeMs = 400;
    const rollout = await upgrade(f, { version: VERSION, hosts: [b] });
    expect(rollout.statusCode, rollout.body).toBe(200);
    const refused = await restart(clusterId);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: "cluster_busy", message: expect.stringContaining("being upgraded") });
    expect((await restart(other)).statusCode).toBe(200);
    await f.idle();
    expect((await operation(f, rollout.json().operationId))?.state).toBe("succeeded");
    // Once the agent rollout ended, the restart goes through.
    expect((await restart(clusterId)).statusCode).toBe(200);
    await f.idle();
  });

  it("plans the batches with the request's own checks, recording and sending nothing", async () => {
    const f = await fleetWithPackage(3);
    fleets.push(f);
    const [a, b, c] = [f.id(0), f.id(1), f.id(2)];
    const clusterId = await f.createCluster("plan");
    expect((await f.attach(clusterId, [m(a), m(b), w(c)])).statusCode).toBe(200);
    await f.idle();
    const plan = (body: Record<string, unknown>) =>
      f.t.request({ method: "POST", url: `/v4/${f.t.projectId}/hostAgentUpgrades/plan`, payload: body });
    const ops = async () => (await f.t.db.select().from(operations)).length;
    const before = await ops();
    const sentBefore = f.sent.length;
    const planned = await plan({ version: VERSION, hosts: [a, b, c], batchSize: 2 });
    expect(planned.statusCode, planned.body).toBe(200);
    // The same batches the request answers: the two masters of one cluster apart.
    expect(planned.json()).toEqual({ batches: [[a, c], [b]] });
    const unknownVersion = await plan({ version: "9.9.9", hosts: [a] });
    expect(unknownVersion.statusCode).toBe(400);
    expect(unknownVersion.json()).toMatchObject({ field: "version" });
    expect((await plan({ version: VERSION, hosts: [a, a] })).json()).toMatchObject({ field: "hosts" });
    expect((await plan({ version: VERSION, hosts: ["no-such-host"] })).statusCode).toBe(404);
    expect(await ops()).toBe(before);
    expect(f.sent.length).toBe(sentBefore);

    // While a rollout of these hosts runs, the plan is refused as the request would be.
    f.agent(2).upgradeTimeMs = 400;
    const started = await upgrade(f, { version: VERSION, hosts: [c], batchSize: 2 });
    expect(started.statusCode, started.body).toBe(200);
    const busy = await plan({ version: VERSION, hosts: [a] });
    expect(busy.statusCode).toBe(409);
    expect(busy.json()).toMatchObject({ code: "upgrade_in_progress" });
    await f.idle();
  });

  it("refuses bad requests with the right status, recording nothing", async () => {
    const f = await fleetWithPackage(2);
    fleets.push(f);
    const ops = async () => (await f.t.db.select().from(operations)).length;
    const before = await ops();
    const unknownVersion = await upgrade(f, { version: "9.9.9", hosts: [f.id(0)] });
    expect(unknownVersion.statusCode).toBe(400);
    expect(unknownVersion.json().field).toBe("version");
    const badVersion = await upgrade(f, { version: "../etc", hosts: [f.id(0)] });
    expect(badVersion.statusCode).toBe(400);
    expect(badVersion.json().field).toBe("version");
    expect((await upgrade(f, { version: VERSION, hosts: [] })).json().field).toBe("hosts");
    expect((await upgrade(f, { version: VERSION, hosts: [f.id(0)], batchSize: 0 })).json().field).toBe("batchSize");
    expect((await upgrade(f, { version: VERSION, hosts: ["no-such-host"] })).statusCode).toBe(404);
    // Another project's token may not use this project's path; this project's hosts are not another's.
    expect((await upgrade(f, { version: VERSION, hosts: [f.id(0)] }, f.t.otherToken)).statusCode).toBe(403);
    const foreign = await f.t.request({
      method: "POST",
      url: `/v4/${f.t.otherProjectId}/hostAgentUpgrades`,
      payload: { version: VERSION, hosts: [f.id(0)] },
      token: f.t.otherToken,
    });
    expect(foreign.statusCode).toBe(404);
    await f.agent(1).stop();
    await waitFor("host offline", () => !f.t.app.keelson.agents.isConnected(f.id(1)));
    const offline = await upgrade(f, { version: VERSION, hosts: [f.id(0), f.id(1)] });
    expect(offline.statusCode).toBe(409);
    expect(offline.json().message).toContain(f.id(1));
    expect(await ops()).toBe(before);

    // One rollout per project at a time.
    f.agent(0).upgradeTimeMs = 500;
    expect((await upgrade(f, { version: VERSION, hosts: [f.id(0)] })).statusCode).toBe(200);
    expect((await upgrade(f, { version: VERSION, hosts: [f.id(0)] })).statusCode).toBe(409);
    await f.idle();
  });

  it("resumes after a control-plane restart: a finished batch is not asked again", async () => {
    const first = await fleetWithPackage(2);
    const { t, sim } = first;
    first.agent(1).upgradeTimeMs = 60_000;
    const res = await upgrade(first, { version: VERSION, hosts: [first.id(0), first.id(1)] });
    expect(res.statusCode).toBe(200);
    const opId = res.json().operationId as string;
    await waitFor("second batch asked", () => first.agent(1).agentUpgrades === 1, 10_000);
    expect((await operation(first, opId))?.cursor).toMatchObject({ step: 1 });

    const { port } = t.app.server.address() as AddressInfo;
    await t.close(true);
    // The new control plane on the same data and port; the agents reconnect by themselves.
    first.agent(1).upgradeTimeMs = 20;
    const t2 = await createTestApp({ dataDir: t.dataDir, agentHub: { presence: { flushDelayMs: 5 } } });
    const sent = recordCommands(t2);
    await t2.app.listen({ host: "127.0.0.1", port });
    const second = fleetOf(t2, `http://127.0.0.1:${port}`, sim, sent);
    fleets.push(second);
    await waitFor("operation done", async () => (await operation(second, opId))?.state === "succeeded", 20_000);
    expect(first.agent(0).agentUpgrades).toBe(1);
    expect(sent.filter((s) => s.name === "agent.upgrade").map((s) => s.hostId)).toEqual([first.id(1)]);
    expect(first.agent(1).agentVersion).toBe(VERSION);
  });
});
