import { clusters, firstRow, nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";
import { batchesOf, FleetAllocator, post, type RollSend, readyCluster, recordRolls } from "./rollout-harness.ts";

const PHASE_MS = 120;
const FROM = "1.30.6-kls.1";
const PATCH = "1.30.8-kls.1";
const MINOR = "1.31.4-kls.1";

let f: Fleet;
let rolls: RollSend[];
let pool: FleetAllocator;
beforeAll(async () => {
  f = await startFleet(40, { namePrefix: "upg", phaseTimeMs: PHASE_MS });
  rolls = recordRolls(f);
  pool = new FleetAllocator(f);
});
afterAll(() => f.close());

const rollsTo = (ids: string[]) => rolls.filter((r) => ids.includes(r.hostId));
const byName = <T extends { hostname: string }>(list: T[]) =>
  [...list].sort((a, b) => a.hostname.localeCompare(b.hostname));
const clusterRow = async (id: string) => firstRow(await f.t.db.select().from(clusters).where(eq(clusters.id, id)));

describe("cluster upgrade", () => {
  it("v4 patch: masters one at a time, batchUpgradeNodes together, then the rest in batches; versions move", async () => {
    const masters = byName(pool.take(2));
    const workers = byName(pool.take(5));
    const clusterId = await readyCluster(f, "upg-v4", masters, workers, { kubeRoleVersion: FROM });
    const chosen = [workers[3], workers[4]].map((a) => a?.hostId as string);
    const res = await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {
      batchUpgradePercent: 40,
      batchUpgradeNodes: chosen,
      containerRuntime: "docker",
      addonVersions: { coredns: "1.11.1" },
    });
    expect(res.statusCode, res.body).toBe(200);
    const during = await f.cluster(clusterId, "v3");
    expect(during).toMatchObject({ status: "upgrading", taskStatus: "upgrading", upgradingTo: PATCH });
    await f.idle();

    const all = [...masters, ...workers];
    const sent = rollsTo(all.map((a) => a.hostId));
    expect(sent.every((r) => r.name === "node.upgrade")).toBe(true);
    expect(
      sent.every((r) =>
        r.busy.every((id) => sent.some((s) => s.hostId === id && Math.abs(s.at - r.at) < PHASE_MS / 2)),
      ),
    ).toBe(true);
    const batches = batchesOf(sent, PHASE_MS / 2);
    // 40% of 5 workers = 2 per batch.
    expect(batches).toEqual([
      [masters[0]?.hostId],
      [masters[1]?.hostId],
      expect.arrayContaining(chosen),
      // Within a batch the commands go out together, in no particular order.
      expect.arrayContaining([workers[0]?.hostId, workers[1]?.hostId]),
      [workers[2]?.hostId],
    ]);
    expect(all.map((a) => [a.upgrades, a.kubeRoleVersion])).toEqual(all.map(() => [1, PATCH]));
    const after = await f.cluster(clusterId, "v3");
    expect(after).toMatchObject({ status: "ok", taskStatus: "success", kubeRoleVersion: PATCH, upgradingTo: null });
    expect((await clusterRow(clusterId))?.spec).toMatchObject({
      containerRuntime: "docker",
      addonVersions: { coredns: "1.11.1" },
    });
    for (const a of all) expect((await f.node(a.hostId, "v3")).actualKubeRoleVersion).toBe(PATCH);
  });

  it("v3 takes the patch target when there is one, else the minor target", async () => {
    const [m1] = pool.take(1);
    const clusterId = await readyCluster(f, "upg-v3", [m1 as never], [], { kubeRoleVersion: FROM });
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/upgrade`, {})).statusCode).toBe(200);
    await f.idle();
    expect((await f.cluster(clusterId, "v3")).kubeRoleVersion).toBe(PATCH);
    expect((await post(f, `/v3/{p}/clusters/${clusterId}/upgrade`, {})).statusCode).toBe(200);
    await f.idle();
    expect((await f.cluster(clusterId, "v3")).kubeRoleVersion).toBe(MINOR);
    expect(m1?.upgrades).toBe(2);
    // At the newest version: nowhere to go.
    const res = await post(f, `/v3/{p}/clusters/${clusterId}/upgrade`, {});
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ field: "type", code: "no_upgrade_target" });
  });

  it("refuses bad requests with 400 naming the field, changing nothing", async () => {
    const [master] = pool.take(1);
    const [worker] = pool.take(1);
    const clusterId = await readyCluster(f, "upg-rules", [master as never], [worker as never], {
      kubeRoleVersion: MINOR.replace("1.31.4", "1.31.2"),
    });
    const base = `/v4/{p}/clusters/${clusterId}/upgrade`;
    const cases: [string, string, unknown, string | undefined, string | undefined][] = [
      ["no minor target", `${base}?type=minor`, {}, "type", "no_upgrade_target"],
      ["no type", base, {}, undefined, undefined],
      [
        "a master in batchUpgradeNodes",
        `${base}?type=patch`,
        { batchUpgradeNodes: [master?.hostId] },
        "batchUpgradeNodes[0]",
        "not_a_worker",
      ],
      [
        "an unknown node",
        `${base}?type=patch`,
        { batchUpgradeNodes: [worker?.hostId, "nope"] },
        "batchUpgradeNodes[1]",
        "not_a_worker",
      ],
      [
        "a node twice",
        `${base}?type=patch`,
        { batchUpgradeNodes: [worker?.hostId, worker?.hostId] },
        "batchUpgradeNodes[1]",
        "duplicate_node",
      ],
      ["batch percent 0", `${base}?type=patch`, { batchUpgradePercent: 0 }, undefined, undefined],
      ["batch percent 101", `${base}?type=patch`, { batchUpgradePercent: 101 }, undefined, undefined],
      [
        "a non-string addon version",
        `${base}?type=patch`,
        { addonVersions: { coredns: 1 } },
        "addonVersions.coredns",
        undefined,
      ],
      ["an unknown runtime", `${base}?type=patch`, { containerRuntime: "rkt" }, undefined, undefined],
      [
        "v3 with batchUpgradeNodes",
        `/v3/{p}/clusters/${clusterId}/upgrade`,
        { batchUpgradeNodes: [worker?.hostId] },
        undefined,
        undefined,
      ],
      ["an unknown field", `${base}?type=patch`, { nope: 1 }, undefined, undefined],
    ];
    const before = await f.snapshot();
    for (const [what, url, body, field, code] of cases) {
      const res = await post(f, url, body);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
      if (field) expect(res.json(), what).toMatchObject({ field });
      if (code) expect(res.json(), what).toMatchObject({ code });
    }
    expect(await f.snapshot()).toEqual(before);
    expect([master?.upgrades, worker?.upgrades]).toEqual([0, 0]);
  });

  it("refuses an unhealthy cluster unless force=true (v4)", async () => {
    const [master] = pool.take(1);
    const [worker] = pool.take(1);
    const clusterId = await readyCluster(f, "upg-sick", [master as never], [worker as never], {
      kubeRoleVersion: FROM,
    });
    worker?.setFailPhase("kubelet");
    const status = async () =>
      firstRow(
        await f.t.db
          .select({ status: nodes.status })
          .from(nodes)
          .where(eq(nodes.id, worker?.hostId ?? "")),
      )?.status;
    await waitFor("the worker failed", async () => (await status()) === "failed", 3000);
    const refused = await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {});
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json()).toMatchObject({ field: "force", code: "cluster_unhealthy" });
    const v3 = await post(f, `/v3/{p}/clusters/${clusterId}/upgrade`, {});
    expect(v3.statusCode).toBe(400);
    expect((await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch&force=true`, {})).statusCode).toBe(200);
    await f.idle();
    // Still failing, the worker stops the forced rollout; the master was upgraded.
    const cluster = await f.cluster(clusterId, "v3");
    expect(cluster).toMatchObject({ taskStatus: "error", kubeRoleVersion: FROM, upgradingTo: null });
    expect(cluster.taskError).toContain(worker?.hostId);
    expect(cluster.taskError).toContain("kubelet");
    expect((await f.node(master?.hostId as string, "v3")).actualKubeRoleVersion).toBe(PATCH);
    expect((await f.node(worker?.hostId as string, "v3")).actualKubeRoleVersion).toBe(FROM);
  });

  it("a failed node stops the rollout; a new request resumes, skipping nodes already at the target", async () => {
    const [master] = pool.take(1);
    const workers = byName(pool.take(4));
    const clusterId = await readyCluster(f, "upg-resume", [master as never], workers, { kubeRoleVersion: FROM });
    const bad = workers[1] as NonNullable<(typeof workers)[1]>;
    bad.failPhase = "kube-proxy";
    expect(
      (await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, { batchUpgradePercent: 25 })).statusCode,
    ).toBe(200);
    await f.idle();
    let cluster = await f.cluster(clusterId, "v3");
    expect(cluster).toMatchObject({ taskStatus: "error", kubeRoleVersion: FROM });
    expect(cluster.taskError).toContain(bad.hostId);
    expect([master, ...workers].map((a) => a?.upgrades)).toEqual([1, 1, 1, 0, 0]);
    // Fixed: the node recovers (still at the old version as far as the control plane knows).
    bad.setFailPhase(undefined);
    expect((await clusterRow(clusterId))?.status).toBe("ok");
    await waitFor(
      "the node ok again",
      async () =>
        firstRow(await f.t.db.select({ status: nodes.status }).from(nodes).where(eq(nodes.id, bad.hostId)))?.status ===
        "ok",
      3000,
    );
    expect(
      (await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, { batchUpgradePercent: 25 })).statusCode,
    ).toBe(200);
    await f.idle();
    cluster = await f.cluster(clusterId, "v3");
    expect(cluster).toMatchObject({ taskStatus: "success", kubeRoleVersion: PATCH, upgradingTo: null });
    expect([master, ...workers].map((a) => a?.upgrades)).toEqual([1, 1, 2, 1, 1]);
  });
});
