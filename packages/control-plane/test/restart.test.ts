import { firstRow, nodes, operations } from "@keelson/db";
import { AGENT_CAPABILITIES } from "@keelson/protocol";
import { and, eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimAgent } from "../../../test/sim/index.ts";
import type { NodeReportEvent } from "../src/agents/node-events.ts";
import type { OperationEvent } from "../src/runner/types.ts";
import { defaultServerSettings } from "../src/settings.ts";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";
import { batchesOf, FleetAllocator, post, type RollSend, readyCluster, recordRolls } from "./rollout-harness.ts";

const PHASE_MS = 120;

let f: Fleet;
let rolls: RollSend[];
let pool: FleetAllocator;
beforeAll(async () => {
  f = await startFleet(45, { namePrefix: "rst", phaseTimeMs: PHASE_MS });
  rolls = recordRolls(f);
  pool = new FleetAllocator(f);
});
afterAll(() => f.close());

const rollsTo = (ids: string[]) => rolls.filter((r) => ids.includes(r.hostId));

describe("staggered restarts", () => {
  it("restartMasters: one master at a time, each only once the one before is back", async () => {
    const masters = pool.take(3);
    const workers = pool.take(2);
    const clusterId = await readyCluster(f, "rst-masters", masters, workers);
    const ids = masters.map((a) => a.hostId);
    const res = await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`);
    expect(res.statusCode, res.body).toBe(200);
    expect((await f.cluster(clusterId, "v3")).taskStatus).toBe("restarting");
    await f.idle();

    const sent = rollsTo([...ids, ...workers.map((a) => a.hostId)]);
    expect(sent.map((r) => r.hostId)).toEqual([...ids].sort((a, b) => nameOf(a).localeCompare(nameOf(b))));
    expect(sent.every((r) => r.name === "node.restart")).toBe(true);
    // When each master got its restart, every node of the fleet was ok: the one before was back.
    for (const r of sent) expect(r.busy).toEqual([]);
    for (let i = 1; i < sent.length; i++) {
      expect((sent[i] as RollSend).at - (sent[i - 1] as RollSend).at).toBeGreaterThanOrEqual(PHASE_MS - 5);
    }
    expect(masters.map((a) => a.restarts)).toEqual([1, 1, 1]);
    expect(workers.map((a) => a.restarts)).toEqual([0, 0]);
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
  });

  it("restartWorkers: batches of batchPercent (rounded down, at least 1), each after the previous is back", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(7);
    const clusterId = await readyCluster(f, "rst-workers", [master as never], workers);
    const ids = workers.map((a) => a.hostId);
    const res = await post(f, `/v3/{p}/clusters/${clusterId}/restartWorkers?batchPercent=30`);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const sent = rollsTo([...ids, master?.hostId as string]);
    expect(sent.map((r) => r.hostId).sort()).toEqual([...ids].sort());
    // 30% of 7 = 2.1 -> 2 per batch: 2, 2, 2, 1.
    expect(batchesOf(sent, PHASE_MS / 2).map((b) => b.length)).toEqual([2, 2, 2, 1]);
    for (const r of sent) expect(r.busy.filter((id) => !ids.includes(id) || !sameBatch(sent, r, id))).toEqual([]);
    expect(workers.every((a) => a.restarts === 1)).toBe(true);
    expect(master?.restarts).toBe(0);
  });

  it("restart: masters first (one at a time), then workers; default batch 10% is at least one", async () => {
    const masters = pool.take(2);
    const workers = pool.take(3);
    const clusterId = await readyCluster(f, "rst-all", masters, workers);
    const res = await post(f, `/v3/{p}/clusters/${clusterId}/restart`);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const all = [...masters, ...workers].map((a) => a.hostId);
    const sent = rollsTo(all);
    expect(
      sent
        .slice(0, 2)
        .map((r) => r.hostId)
        .sort(),
    ).toEqual(masters.map((a) => a.hostId).sort());
    expect(
      sent
        .slice(2)
        .map((r) => r.hostId)
        .sort(),
    ).toEqual(workers.map((a) => a.hostId).sort());
    // One at a time: no node of the cluster was still restarting when the next was sent.
    expect(sent.map((r) => r.busy)).toEqual([[], [], [], [], []]);
    expect(batchesOf(sent, PHASE_MS / 2).map((b) => b.length)).toEqual([1, 1, 1, 1, 1]);
    expect([...masters, ...workers].map((a) => a.restarts)).toEqual([1, 1, 1, 1, 1]);
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
  });

  it("announces each batch on the event stream, started then done, with its nodes (masters alone, workers together)", async () => {
    const masters = pool.take(1);
    const workers = byName(pool.take(4));
    const clusterId = await readyCluster(f, "rst-batches", masters, workers);
    const seen: string[] = [];
    // Restarts sent to the batch's nodes when the event came (the runner swallows a listener's throw).
    const sentThen: string[] = [];
    const onEvent = (e: OperationEvent) => {
      if (e.targetId !== clusterId || e.type !== "operation.step") return;
      const b = e.batch;
      seen.push(
        b ? `${e.step} ${b.number}/${b.of} ${b.state}: ${b.nodes.map((n) => n.name).join(",")}` : `${e.step} done`,
      );
      if (b) sentThen.push(`${b.state} ${b.nodes.map((n) => rollsTo([n.id]).length).join(",")}`);
    };
    f.t.app.keelson.runner.events.on("event", onEvent);
    try {
      const res = await post(f, `/v3/{p}/clusters/${clusterId}/restart?batchPercent=50`);
      expect(res.statusCode, res.body).toBe(200);
      await f.idle();
    } finally {
      f.t.app.keelson.runner.events.off("event", onEvent);
    }
    const [m] = masters.map((a) => a.hostname);
    const [w1, w2, w3, w4] = workers.map((a) => a.hostname);
    // 50% of 4 workers: batches of 2.
    expect(seen).toEqual([
      `restart-masters 1/1 started: ${m}`,
      `restart-masters 1/1 done: ${m}`,
      "restart-masters done",
      `restart-workers 1/2 started: ${w1},${w2}`,
      `restart-workers 1/2 done: ${w1},${w2}`,
      `restart-workers 2/2 started: ${w3},${w4}`,
      `restart-workers 2/2 done: ${w3},${w4}`,
      "restart-workers done",
      "settle done",
    ]);
    // Each node's restart is sent between its batch's started and done.
    expect(sentThen).toEqual(["started 0", "done 1", "started 0,0", "done 1,1", "started 0,0", "done 1,1"]);
  });

  it("a stale converging then ok, arriving after the command left but before it is accepted, is not the node back", async () => {
    const masters = byName(pool.take(2));
    const [first, second] = masters as [SimAgent, SimAgent];
    const clusterId = await readyCluster(f, "rst-stale", masters, []);
    // Reports of an earlier re-convergence still on their way when the restart left: they reach
    // the control plane after the command was sent and before the agent takes it up. The
    // restart's own work starts a while after the answer (a real agent's drain).
    first.beforeRoll = () => {
      first.nodeStatus = "converging";
      first.sendReport();
      first.nodeStatus = "ok";
      first.sendReport();
    };
    first.rollStartMs = 3 * PHASE_MS;
    // What the first master had done when the second one's restart left.
    let firstWhenSecondSent: { command: string | undefined; status: string } | undefined;
    second.beforeRoll = () => {
      firstWhenSecondSent = { command: first.command, status: first.nodeStatus };
    };
    try {
      const res = await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`);
      expect(res.statusCode, res.body).toBe(200);
      await f.idle();
    } finally {
      first.beforeRoll = undefined;
      first.rollStartMs = 0;
      second.beforeRoll = undefined;
    }
    const [operation] = await f.t.db
      .select({ id: operations.id })
      .from(operations)
      .where(and(eq(operations.targetId, clusterId), eq(operations.kind, "cluster.restart")));
    // The second master went down only once the first had run its restart and was back.
    expect(firstWhenSecondSent).toEqual({ command: `${operation?.id}:${first.hostId}:node.restart`, status: "ok" });
    expect(masters.map((a) => a.restarts)).toEqual([1, 1]);
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
  });

  it("an agent that does not name its command (an older release) is still restarted, judged by its reports' order", async () => {
    const masters = byName(pool.take(2));
    const clusterId = await readyCluster(f, "rst-old-agent", masters, []);
    const old = masters[0] as SimAgent;
    const hub = f.t.app.keelson.agents;
    old.capabilities = [AGENT_CAPABILITIES.nodePackages];
    old.kill();
    await waitFor("the old agent back", () => hub.supports(old.hostId, AGENT_CAPABILITIES.reportCommand) === false);
    const reports: NodeReportEvent[] = [];
    const onReport = (event: NodeReportEvent) => {
      if (event.hostId === old.hostId) reports.push(event);
    };
    hub.nodeEvents.all.on("node-report", onReport);
    try {
      expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`)).statusCode).toBe(200);
      await f.idle();
      expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
    } finally {
      hub.nodeEvents.all.off("node-report", onReport);
      old.capabilities = Object.values(AGENT_CAPABILITIES);
      old.kill();
      await waitFor("the agent back", () => hub.supports(old.hostId, AGENT_CAPABILITIES.reportCommand) === true);
    }
    // Its welcome announced nothing, so its reports named nothing, and the restart still ran once.
    expect(reports.length).toBeGreaterThan(0);
    expect(reports.every((r) => !r.namesCommands && r.command === undefined)).toBe(true);
    expect(masters.map((a) => a.restarts)).toEqual([1, 1]);
  });

  it("requests fired at once (two upgrades, a restart, a worker restart): exactly one wins, the others get 409", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(1);
    const clusterId = await readyCluster(f, "rst-race", [master as never], workers, {
      kubeRoleVersion: "1.30.6-kls.1",
    });
    const urls = [
      `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`,
      `/v3/{p}/clusters/${clusterId}/restart`,
      `/v3/{p}/clusters/${clusterId}/upgrade`,
      `/v3/{p}/clusters/${clusterId}/restartWorkers`,
    ];
    const answers = await Promise.all(urls.map((url) => post(f, url, url.includes("upgrade") ? {} : undefined)));
    const codes = answers.map((a) => a.statusCode);
    expect(
      codes.filter((c) => c === 200),
      codes.join(","),
    ).toHaveLength(1);
    expect(
      codes.filter((c) => c === 409),
      codes.join(","),
    ).toHaveLength(3);
    for (const a of answers.filter((x) => x.statusCode === 409))
      expect(a.json()).toMatchObject({ code: "cluster_busy" });
    await f.idle();
    // One operation ran, not two.
    const ops = await f.t.db
      .select({ kind: operations.kind })
      .from(operations)
      .where(and(eq(operations.targetId, clusterId), inArray(operations.kind, ["cluster.restart", "cluster.upgrade"])));
    expect(ops).toHaveLength(1);
  });

  it("refuses a second restart or an upgrade while one runs (409), and lists the restart's nodes", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(2);
    const clusterId = await readyCluster(f, "rst-busy", [master as never], workers);
    // The master takes long to come back: the restart stays busy meanwhile.
    (master as NonNullable<typeof master>).phaseTimeMs = 1500;
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/restart`)).statusCode).toBe(200);
    for (const url of [
      `/v3/{p}/clusters/${clusterId}/restart`,
      `/v3/{p}/clusters/${clusterId}/restartWorkers`,
      `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`,
      `/v3/{p}/clusters/${clusterId}/upgrade`,
    ]) {
      const res = await post(f, url, url.includes("upgrade") ? {} : undefined);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(409);
      expect(res.json()).toMatchObject({ code: "cluster_busy" });
    }
    await waitFor(
      "the master's converging report",
      async () =>
        firstRow(
          await f.t.db
            .select({ status: nodes.status })
            .from(nodes)
            .where(eq(nodes.id, master?.hostId ?? "")),
        )?.status === "converging",
    );
    const list = await f.t.request({ method: "GET", url: `/v3/${f.t.projectId}/currentRollingRestarts` });
    expect(list.statusCode).toBe(200);
    const entries = list.json() as unknown as { name: string; runState: boolean }[];
    const ours = [master?.hostId, ...workers.map((a) => a.hostId)];
    expect(entries.filter((e) => ours.includes(e.name))).toEqual(
      expect.arrayContaining([
        { name: master?.hostId, runState: false },
        { name: workers[0]?.hostId, runState: true },
        { name: workers[1]?.hostId, runState: true },
      ]),
    );
    // Another project sees none of them.
    const other = await f.t.request({
      method: "GET",
      url: `/v3/${f.t.otherProjectId}/currentRollingRestarts`,
      token: f.t.otherToken,
    });
    expect(other.json()).toEqual([]);
    await f.idle();
    (master as NonNullable<typeof master>).phaseTimeMs = PHASE_MS;
    const after = await f.t.request({ method: "GET", url: `/v3/${f.t.projectId}/currentRollingRestarts` });
    expect((after.json() as unknown as { name: string }[]).filter((e) => ours.includes(e.name))).toEqual([]);
  });

  it("fails when a node's phase fails, naming node and phase; no further node is touched", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(4);
    const clusterId = await readyCluster(f, "rst-fail", [master as never], workers);
    const sorted = [...workers].sort((a, b) => a.hostname.localeCompare(b.hostname));
    (sorted[1] as NonNullable<(typeof sorted)[1]>).failPhase = "kubelet";
    const res = await post(f, `/v3/{p}/clusters/${clusterId}/restartWorkers?batchPercent=25`);
    expect(res.statusCode).toBe(200);
    await f.idle();
    const cluster = await f.cluster(clusterId, "v3");
    expect(cluster.taskStatus).toBe("error");
    expect(cluster.taskError).toContain((sorted[1] as NonNullable<(typeof sorted)[1]>).hostId);
    expect(cluster.taskError).toContain("kubelet");
    expect(sorted.map((a) => a.restarts)).toEqual([1, 1, 0, 0]);
    (sorted[1] as NonNullable<(typeof sorted)[1]>).setFailPhase(undefined);
  });

  it("fails after KEELSON_NODE_RESTART_TIMEOUT_MS, saying where the node is, touching nothing after", async () => {
    const masters = pool.take(2);
    const clusterId = await readyCluster(f, "rst-timeout", masters, []);
    const sorted = [...masters].sort((a, b) => a.hostname.localeCompare(b.hostname));
    (sorted[0] as NonNullable<(typeof sorted)[0]>).phaseTimeMs = 5000;
    f.t.settings.nodeRestartTimeoutMs = 400;
    try {
      const started = Date.now();
      expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`)).statusCode).toBe(200);
      await f.idle();
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      f.t.settings.nodeRestartTimeoutMs = defaultServerSettings().nodeRestartTimeoutMs;
    }
    const cluster = await f.cluster(clusterId, "v3");
    expect(cluster.taskStatus).toBe("error");
    expect(cluster.taskError).toMatch(/did not come back from its restart within 0.4 s: status converging; at phase/);
    expect(cluster.taskError).toContain((sorted[0] as NonNullable<(typeof sorted)[0]>).hostId);
    expect(sorted.map((a) => a.restarts)).toEqual([1, 0]);
    (sorted[0] as NonNullable<(typeof sorted)[0]>).phaseTimeMs = PHASE_MS;
  });

  it("waits for a node whose link drops mid-restart and completes once it is back", async () => {
    const [master] = pool.take(1);
    const workers = pool.take(2);
    const clusterId = await readyCluster(f, "rst-link", [master as never], workers);
    const victim = byName(workers)[0] as NonNullable<(typeof workers)[0]>;
    victim.phaseTimeMs = 400;
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartWorkers?batchPercent=50`)).statusCode).toBe(200);
    await waitFor("the victim restarting", () => victim.restarts === 1, 5000);
    victim.kill(); // drops the socket without a close frame; the simulated agent reconnects with backoff
    await f.idle();
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
    expect(workers.map((a) => a.restarts)).toEqual([1, 1]);
    expect(victim.connects).toBeGreaterThanOrEqual(2);
    victim.phaseTimeMs = PHASE_MS;
  });

  it("validates batchPercent and refuses clusters with nothing to restart; 404 for unknown clusters", async () => {
    const clusterId = await f.createCluster("rst-empty");
    await f.idle(); // not busy with its create: the rules below are the ones refused
    for (const [url, status, field] of [
      [`/v3/{p}/clusters/${clusterId}/restartWorkers?batchPercent=0`, 400, undefined],
      [`/v3/{p}/clusters/${clusterId}/restartWorkers?batchPercent=101`, 400, undefined],
      [`/v3/{p}/clusters/${clusterId}/restart`, 400, "uuid"],
      [`/v3/{p}/clusters/00000000-0000-4000-8000-000000000000/restart`, 404, undefined],
    ] as const) {
      const res = await post(f, url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(status);
      if (field) expect(res.json()).toMatchObject({ field, code: "nothing_to_restart" });
    }
  });
});

function byName<T extends { hostname: string }>(list: T[]): T[] {
  return [...list].sort((a, b) => a.hostname.localeCompare(b.hostname));
}

function nameOf(hostId: string): string {
  return f.sim.agents.find((a) => a.hostId === hostId)?.hostname ?? "";
}

/** Whether `id` was sent in the same batch as `r` (so it may still be converging). */
function sameBatch(sent: RollSend[], r: RollSend, id: string): boolean {
  const other = sent.find((s) => s.hostId === id);
  return other !== undefined && Math.abs(other.at - r.at) < PHASE_MS / 2;
}
