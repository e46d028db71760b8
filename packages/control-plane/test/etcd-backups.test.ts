import { firstRow, nodes } from "@keelson/db";
import type { CommandPayload } from "@keelson/protocol";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Fleet, m, startFleet, w, waitFor } from "./membership-harness.ts";

/**
 * etcd backups, control-plane side: a cluster update pushes the new settings to the
 * cluster's connected nodes (`node.settings`), and a master's `backup.report` becomes the
 * cluster's etcdBackup.taskStatus / taskErrorDetail. Simulated agents over real WebSockets.
 */

let f: Fleet;
let clusterId: string;
let master: string;
let worker: string;

beforeAll(async () => {
  f = await startFleet(3, { namePrefix: "bk" });
  master = f.id(0);
  worker = f.id(1);
  clusterId = await f.createCluster("backups");
  const res = await f.attach(clusterId, [m(master), w(worker)]);
  expect(res.statusCode, res.body).toBe(200);
  await f.idle();
});
afterAll(() => f.close());

type EtcdBackup = { taskStatus: string; taskErrorDetail: string; isEtcdBackupEnabled: boolean };
async function backupOf(): Promise<EtcdBackup> {
  return (await f.cluster(clusterId)).etcdBackup as EtcdBackup;
}

async function waitForBackup(what: string, check: (b: EtcdBackup) => boolean): Promise<EtcdBackup> {
  let last: EtcdBackup | undefined;
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    last = await backupOf();
    if (check(last)) return last;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}; last etcdBackup: ${JSON.stringify(last)}`);
}

describe("etcd backup status and settings", () => {
  it("a master's failed backup shows as the cluster's etcdBackup error, naming the master", async () => {
    f.agent(0).send({
      type: "backup.report",
      clusterId,
      ok: false,
      error: "no space left on device",
      at: new Date().toISOString(),
    });
    const b = await waitForBackup("error", (x) => x.taskStatus === "error");
    expect(b.taskErrorDetail).toBe(`master ${f.agent(0).hostname} (${master}): no space left on device`);
    // v3 shows the same detail at the top level.
    expect((await f.cluster(clusterId, "v3")).taskErrorDetail).toBe(b.taskErrorDetail);
  });

  it("ignores reports from a worker and for another cluster", async () => {
    f.agent(1).send({ type: "backup.report", clusterId, ok: true, at: new Date().toISOString() });
    f.agent(0).send({ type: "backup.report", clusterId: "not-this-one", ok: true, at: new Date().toISOString() });
    // A later frame on the same link is handled after those: its effect proves they were seen.
    f.agent(0).send({
      type: "backup.report",
      clusterId,
      ok: false,
      error: "second failure",
      at: new Date().toISOString(),
    });
    const b = await waitForBackup("second failure", (x) => x.taskErrorDetail.endsWith("second failure"));
    expect(b.taskStatus).toBe("error");
  });

  it("an update pushes the new settings to the connected nodes; the master's good backup clears the error", async () => {
    const before = f.sent.length;
    const res = await f.t.request({
      method: "PUT",
      url: `/v4/${f.t.projectId}/clusters/${clusterId}`,
      payload: { etcdBackup: { isEtcdBackupEnabled: true, intervalInMins: 30, maxIntervalBackupCount: 4 } },
    });
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const pushed = f.sent.slice(before).filter((c) => c.name === "node.settings");
    expect(pushed.map((c) => c.hostId).sort()).toEqual([master, worker].sort());
    for (const c of pushed) {
      const payload = c.payload as CommandPayload<"node.settings">;
      expect(payload.clusterId).toBe(clusterId);
      expect(payload.settings).toMatchObject({
        isEtcdBackupEnabled: true,
        intervalInMins: 30,
        maxIntervalBackupCount: 4,
        storageType: "local",
      });
    }
    // The simulated master answers with a good backup, as a real one does after its first run.
    const b = await waitForBackup("success", (x) => x.taskStatus === "success");
    expect(b).toMatchObject({ taskErrorDetail: "", isEtcdBackupEnabled: 1 });
    expect(await f.latestOperation(clusterId)).toMatchObject({ kind: "cluster.update", state: "succeeded" });
  });

  it("an offline node does not hold up or fail the update", async () => {
    await f.agent(1).stop();
    await waitFor("worker offline", () => !f.t.app.keelson.agents.isConnected(worker));
    const before = f.sent.length;
    const res = await f.t.request({
      method: "PUT",
      url: `/v4/${f.t.projectId}/clusters/${clusterId}`,
      payload: { etcdBackup: { isEtcdBackupEnabled: true, intervalInMins: 60, maxIntervalBackupCount: 2 } },
    });
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const pushed = f.sent.slice(before).filter((c) => c.name === "node.settings");
    expect(pushed.map((c) => c.hostId)).toEqual([master]);
    expect(await f.latestOperation(clusterId)).toMatchObject({ kind: "cluster.update", state: "succeeded" });
  });

  it("with several masters, one whose latest backup failed keeps the cluster in error until it succeeds", async () => {
    const second = f.id(2);
    expect((await f.attach(clusterId, [m(second)])).statusCode).toBe(200);
    await f.idle();
    const report = (i: number, error?: string) =>
      f.agent(i).send({
        type: "backup.report",
        clusterId,
        ok: error === undefined,
        ...(error === undefined ? {} : { error }),
        at: new Date().toISOString(),
      });
    report(0, "disk full");
    report(2);
    // The second master's success does not hide the first one's failure.
    const backupOfNode = async (id: string) =>
      firstRow(await f.t.db.select({ status: nodes.backupStatus }).from(nodes).where(eq(nodes.id, id)));
    // Two links: on PostgreSQL the two reports are stored side by side, in either order (the
    // cluster row lock makes whichever folds last see both).
    await waitFor(
      "both reports stored",
      async () =>
        (await backupOfNode(second))?.status === "success" && (await backupOfNode(master))?.status === "error",
    );
    const failing = await backupOf();
    expect(failing.taskStatus).toBe("error");
    expect(failing.taskErrorDetail).toBe(`master ${f.agent(0).hostname} (${master}): disk full`);
    report(2, "etcdctl timed out");
    const both = await waitForBackup("both failing", (x) => x.taskErrorDetail.includes("etcdctl timed out"));
    expect(both.taskErrorDetail.split("; ")).toHaveLength(2);
    report(0);
    report(2);
    const ok = await waitForBackup("every master's latest backup good", (x) => x.taskStatus === "success");
    expect(ok.taskErrorDetail).toBe("");
  });
});
