import type { AddressInfo } from "node:net";
import { firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createTestApp } from "./helpers.ts";
import { fleetOf, recordCommands, startFleet, waitFor } from "./membership-harness.ts";
import { post, readyCluster } from "./rollout-harness.ts";

describe("a rolling restart across a control-plane restart", () => {
  it("resumes: a started node gets the same command id again and runs it once; every node restarted exactly once", async () => {
    const first = await startFleet(7, { namePrefix: "rres", phaseTimeMs: 50 });
    const { t, sim } = first;
    const [master, ...workers] = sim.agents as [(typeof sim.agents)[0], ...typeof sim.agents];
    const clusterId = await readyCluster(first, "resume", [master], workers);
    const sorted = [...workers].sort((a, b) => a.hostname.localeCompare(b.hostname));
    // Batches of 2 (34% of 6): the second batch's first worker hangs until the test lets it go.
    const slow = sorted[2] as (typeof sorted)[0];
    slow.phaseTimeMs = 60_000;
    expect((await post(first, `/v3/{p}/clusters/${clusterId}/restart?batchPercent=34`)).statusCode).toBe(200);
    await waitFor("the slow worker's restart", () => slow.restarts === 1, 10_000);
    const op = await first.latestOperation(clusterId);
    // Workers step, the slow worker recorded as started (before its command went out), not done.
    expect(op.cursor).toMatchObject({ step: 1, progress: { started: expect.arrayContaining([slow.hostId]) } });
    expect((op.cursor as { progress: { done: string[] } }).progress.done).not.toContain(slow.hostId);

    const { port } = t.app.server.address() as AddressInfo;
    await t.close(true);
    const t2 = await createTestApp({ dataDir: t.dataDir, agentHub: { presence: { flushDelayMs: 5 } } });
    const sent = recordCommands(t2);
    await t2.app.listen({ host: "127.0.0.1", port });
    const second = fleetOf(t2, `http://127.0.0.1:${port}`, sim, sent);
    try {
      await waitFor("agents back", () => t2.app.keelson.agents.connectedCount === 7, 15_000);
      // Let the slow worker finish (its phases run again, now at once): the resumed rollout
      // waits for it, then goes on with the last batch.
      slow.phaseTimeMs = 0;
      slow.setFailPhase(undefined);
      await waitFor(
        "operation done",
        async () =>
          firstRow(await t2.db.select().from(operations).where(eq(operations.id, op.id)))?.state === "succeeded",
        15_000,
      );
      expect(sim.agents.map((a) => a.restarts)).toEqual([1, 1, 1, 1, 1, 1, 1]);
      // The resumed process skipped the nodes recorded done (the first batch) and sent the rest;
      // the started ones again under the same command id, which the agent ran only once.
      const resent = sent.filter((c) => c.name === "node.restart").map((c) => c.hostId);
      const firstBatch = sorted.slice(0, 2).map((a) => a.hostId);
      expect(resent.filter((id) => firstBatch.includes(id))).toEqual([]);
      expect(resent).toContain(slow.hostId);
      for (const later of sorted.slice(4)) expect(resent).toContain(later.hostId);
      expect(await second.cluster(clusterId, "v3")).toMatchObject({ status: "ok", taskStatus: "success" });
      expect(sim.agents.every((a) => a.nodeStatus === "ok")).toBe(true);
    } finally {
      await second.close();
    }
  });

  it("resumes an upgrade the same way: every node upgraded exactly once, versions at the target", async () => {
    const first = await startFleet(4, { namePrefix: "ures", phaseTimeMs: 50 });
    const { t, sim } = first;
    const [master, ...workers] = sim.agents as [(typeof sim.agents)[0], ...typeof sim.agents];
    const clusterId = await readyCluster(first, "upg-resume", [master], workers, { kubeRoleVersion: "1.30.6-kls.1" });
    const sorted = [...workers].sort((a, b) => a.hostname.localeCompare(b.hostname));
    const slow = sorted[1] as (typeof sorted)[0];
    slow.phaseTimeMs = 60_000;
    const res = await post(first, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, { batchUpgradePercent: 34 });
    expect(res.statusCode, res.body).toBe(200);
    await waitFor("the slow worker's upgrade", () => slow.upgrades === 1, 10_000);
    const op = await first.latestOperation(clusterId);

    const { port } = t.app.server.address() as AddressInfo;
    await t.close(true);
    const t2 = await createTestApp({ dataDir: t.dataDir, agentHub: { presence: { flushDelayMs: 5 } } });
    const sent = recordCommands(t2);
    await t2.app.listen({ host: "127.0.0.1", port });
    const second = fleetOf(t2, `http://127.0.0.1:${port}`, sim, sent);
    try {
      await waitFor("agents back", () => t2.app.keelson.agents.connectedCount === 4, 15_000);
      slow.phaseTimeMs = 0;
      slow.setFailPhase(undefined);
      await waitFor(
        "operation done",
        async () =>
          firstRow(await t2.db.select().from(operations).where(eq(operations.id, op.id)))?.state === "succeeded",
        15_000,
      );
      expect(sim.agents.map((a) => a.upgrades)).toEqual([1, 1, 1, 1]);
      // The started (slow) worker got its command again under the same id and ran it once.
      expect(
        sent
          .filter((c) => c.name === "node.upgrade")
          .map((c) => c.hostId)
          .sort(),
      ).toEqual([slow.hostId, sorted[2]?.hostId].sort());
      expect(await second.cluster(clusterId, "v3")).toMatchObject({
        status: "ok",
        taskStatus: "success",
        kubeRoleVersion: "1.30.8-kls.1",
        upgradingTo: null,
      });
      for (const a of sim.agents)
        expect((await second.node(a.hostId, "v3")).actualKubeRoleVersion).toBe("1.30.8-kls.1");
    } finally {
      await second.close();
    }
  });
});
