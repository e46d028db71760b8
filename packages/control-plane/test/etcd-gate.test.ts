import type { NodePhaseReport } from "@keelson/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimAgent } from "../../../test/sim/index.ts";
import { latestReports } from "../src/agents/latest-reports.ts";
import { NodeDeadlineError } from "../src/domain/clusters/membership/node-link.ts";
import { clusterNodes } from "../src/domain/clusters/rollouts/rollout.ts";
import { waitForEtcdWhole } from "../src/domain/clusters/rollouts/rollout-nodes.ts";
import type { StepContext } from "../src/runner/types.ts";
import { defaultServerSettings } from "../src/settings.ts";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";
import { FleetAllocator, post, type RollSend, readyCluster, recordRolls } from "./rollout-harness.ts";

/**
 * Issue 5: the next master restarts only once the previous one reports etcd healthy with all
 * its members. Simulated masters report the fleet's view of etcd (members: the cluster's
 * masters, healthy: those whose start-etcd runs) unless a test overrides what one says.
 */

const PHASE_MS = 80;

let f: Fleet;
let rolls: RollSend[];
let pool: FleetAllocator;
beforeAll(async () => {
  f = await startFleet(14, { namePrefix: "etg", phaseTimeMs: PHASE_MS });
  rolls = recordRolls(f);
  pool = new FleetAllocator(f);
});
afterAll(() => f.close());

const byName = (list: SimAgent[]) => [...list].sort((a, b) => a.hostname.localeCompare(b.hostname));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rollOf = (a: SimAgent) => rolls.find((r) => r.hostId === a.hostId);

describe("restartMasters waits for etcd to be whole", () => {
  it("holds the next master while the restarted one reports etcd not whole, and goes on once it is", async () => {
    const [a, b, c] = byName(pool.take(3)) as [SimAgent, SimAgent, SimAgent];
    const clusterId = await readyCluster(f, "etg-wait", [a, b, c], []);
    // Masters report what they see when they start; the last one to join saw all three.
    expect([a, b, c].map((x) => x.lastEtcd?.members).sort()).toContain(3);

    // After its restart, a finds one member not answering.
    a.etcdOverride = { members: 3, healthy: 2 };
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`)).statusCode).toBe(200);
    await waitFor(
      "a back ok, etcd not whole",
      () => a.restarts === 1 && a.nodeStatus === "ok" && a.lastEtcd?.healthy === 2,
    );
    await sleep(4 * PHASE_MS);
    expect(b.restarts).toBe(0);
    expect((await f.latestOperation(clusterId)).state).toBe("running");

    // Whole again: the re-check reports it, and the next master goes.
    const wholeAt = Date.now();
    a.setEtcdHealth(undefined);
    await f.idle();
    expect([a, b, c].map((x) => x.restarts)).toEqual([1, 1, 1]);
    expect(rollOf(b)?.at).toBeGreaterThanOrEqual(wholeAt);
    expect((rollOf(c)?.at ?? 0) - (rollOf(b)?.at ?? 0)).toBeGreaterThanOrEqual(PHASE_MS - 5);
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
  });

  it("fails after the timeout naming the master and what it says of etcd; no further master is touched", async () => {
    const [a, b] = byName(pool.take(2)) as [SimAgent, SimAgent];
    const clusterId = await readyCluster(f, "etg-timeout", [a, b], []);
    a.etcdOverride = { members: 2, healthy: 1 };
    f.t.settings.nodeRestartTimeoutMs = 600;
    try {
      expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`)).statusCode).toBe(200);
      await f.idle();
    } finally {
      f.t.settings.nodeRestartTimeoutMs = defaultServerSettings().nodeRestartTimeoutMs;
    }
    const cluster = await f.cluster(clusterId, "v3");
    expect(cluster.taskStatus).toBe("error");
    expect(cluster.taskError).toContain(a.hostId);
    expect(cluster.taskError).toMatch(/etcd is not whole after the restart of master .* within 0\.6 s/);
    expect(cluster.taskError).toContain("it reports 2 etcd member(s), 1 healthy, the cluster has 2 master(s)");
    expect([a.restarts, b.restarts]).toEqual([1, 0]);
    a.setEtcdHealth(undefined);
  });

  it("an agent that sends no etcd health is judged by its etcd phase, as before the field", async () => {
    const [a, b] = byName(pool.take(2)) as [SimAgent, SimAgent];
    for (const x of [a, b]) x.reportsEtcd = false;
    const clusterId = await readyCluster(f, "etg-old", [a, b], []);
    expect(a.lastEtcd).toBeUndefined();
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/restartMasters`)).statusCode).toBe(200);
    await f.idle();
    expect([a.restarts, b.restarts]).toEqual([1, 1]);
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
  });
});

describe("waitForEtcdWhole", () => {
  it("counts only reports received after the restart began", async () => {
    const pair = pool.take(2);
    const clusterId = await readyCluster(f, "etg-since", pair, []);
    const k = f.t.app.keelson;
    const book = latestReports(k.agents);
    // The master that joined second last reported ok, API responding, etcd 2 of 2: before the mark.
    const a = pair.find((x) => book.latestOf(x.hostId)?.etcd?.members === 2) as SimAgent;
    const b = pair.find((x) => x !== a) as SimAgent;
    expect(book.latestOf(a.hostId)).toMatchObject({ status: "ok", apiResponding: true, etcd: { healthy: 2 } });
    const since = book.mark();
    const ctx = {
      op: { targetId: clusterId },
      db: f.t.db,
      log: k.log,
      signal: new AbortController().signal,
    } as unknown as StepContext;
    const masters = (await clusterNodes(f.t.db, clusterId)).masters;
    const master = masters.find((n) => n.id === a.hostId) as (typeof masters)[number];
    const wait = (ms: number) =>
      waitForEtcdWhole(k, ctx, master, masters, since, { at: Date.now() + ms, signal: ctx.signal });

    const stale = await wait(200).catch((err: unknown) => err);
    expect(stale).toBeInstanceOf(NodeDeadlineError);
    expect((stale as Error).message).toContain("it sent no report since its restart began");

    const report = (etcd: { members: number; healthy: number }) =>
      k.agents.nodeEvents.emit({
        type: "node-report",
        hostId: a.hostId,
        projectId: f.t.projectId,
        clusterId,
        report: { status: "ok", phases: a.phases } as NodePhaseReport,
        apiResponding: true,
        etcd: { ...etcd, checkedAt: new Date().toISOString() },
        namesCommands: false,
      });
    let done = false;
    const waiting = wait(2_000).then(() => {
      done = true;
    });
    // Not whole: a member not answering; or every member answering but one member fewer than
    // the cluster has masters; or whole but the node not back ok.
    report({ members: 2, healthy: 1 });
    report({ members: 1, healthy: 1 });
    k.agents.nodeEvents.emit({
      type: "node-report",
      hostId: a.hostId,
      projectId: f.t.projectId,
      clusterId,
      report: { status: "converging", phases: a.phases } as NodePhaseReport,
      apiResponding: false,
      etcd: { members: 2, healthy: 2, checkedAt: new Date().toISOString() },
      namesCommands: false,
    });
    await sleep(50);
    expect(done).toBe(false);
    report({ members: 2, healthy: 2 });
    await waiting;
    expect(done).toBe(true);
    expect(b.restarts).toBe(0);
  });
});
