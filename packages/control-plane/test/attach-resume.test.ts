import type { AddressInfo } from "node:net";
import { clusters, firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createTestApp, openTestStore } from "./helpers.ts";
import { fleetOf, m, recordCommands, startFleet, waitFor } from "./membership-harness.ts";

describe("an attach operation across a control-plane restart", () => {
  it("resumes where it stopped: a master that already joined is not joined again", async () => {
    const first = await startFleet(2, { namePrefix: "res" });
    const { t, sim } = first;
    const [m1, m2] = [first.id(0), first.id(1)];
    // m2 converges only when the test says so, after the restart.
    first.agent(1).phaseTimeMs = 60_000;
    const clusterId = await first.createCluster("resumed");
    expect((await first.attach(clusterId, [m(m1), m(m2)])).statusCode).toBe(200);
    await waitFor("m2's join", () => first.joinsTo(m2).length === 1);
    const op = await first.latestOperation(clusterId);
    expect(op.cursor).toMatchObject({ step: 0, progress: { joined: [m1] } });

    // Stop the control plane (the operation is interrupted, not failed) and start a new one on
    // the same data and port; the agents reconnect by themselves.
    const { port } = t.app.server.address() as AddressInfo;
    await t.close(true);
    const interrupted = await openTestStore(t.dataDir);
    expect(firstRow(await interrupted.db.select().from(operations).where(eq(operations.id, op.id)))?.state).toBe(
      "running",
    );
    await interrupted.close();

    const t2 = await createTestApp({ dataDir: t.dataDir, agentHub: { presence: { flushDelayMs: 5 } } });
    const sent = recordCommands(t2);
    await t2.app.listen({ host: "127.0.0.1", port });
    const second = fleetOf(t2, `http://127.0.0.1:${port}`, sim, sent);
    try {
      await waitFor("agents back", () => t2.app.keelson.agents.connectedCount === 2, 15_000);
      first.agent(1).phaseTimeMs = 0;
      first.agent(1).setFailPhase(undefined); // runs m2's phases again, now without delay
      await waitFor(
        "operation done",
        async () =>
          firstRow(await t2.db.select().from(operations).where(eq(operations.id, op.id)))?.state === "succeeded",
        15_000,
      );
      // m1 got exactly one node.join over both lifetimes; m2 may have been asked again.
      expect(first.joinsTo(m1)).toHaveLength(1);
      expect(second.joinsTo(m1)).toHaveLength(0);
      expect(first.agent(0).commands).toBe(1);
      // The operation settles the status from the nodes as they are at its end; a master whose
      // reconnect is still being written reads unhealthy there, and the status follows its next
      // report. So the status is waited for, not read once.
      const storedStatus = async () =>
        firstRow(await t2.db.select().from(clusters).where(eq(clusters.id, clusterId)))?.status;
      await waitFor("the cluster ok", async () => (await storedStatus()) === "ok", 5_000);
      expect(await second.cluster(clusterId)).toMatchObject({
        status: "ok",
        taskStatus: "success",
        numMasters: 2,
        masterStatus: "healthy",
      });
    } finally {
      await second.close();
    }
  });
});
