import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { databaseTime, dialectOf, replicas } from "@keelson/db";
import { SettingsError } from "@keelson/settings";
import { describe, expect, it } from "vitest";
import { ReplicaRefused, type ReplicaSelf, registerReplica } from "../src/replicas/registry.ts";
import { defaultReplicaId, readServerSettings } from "../src/settings.ts";
import { ADMIN_TOKEN, createTestApp, TEST_DIALECT, type TestApp } from "./helpers.ts";

const SHORT = { operationLeaseMs: 3_000, operationLeaseRenewMs: 100, operationLeaseDeadlineMs: 600 };

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** A row of another server, heartbeating now by the database's clock. */
async function otherReplica(t: TestApp, row: Omit<ReplicaSelf, "url" | "version">): Promise<void> {
  const now = databaseTime(dialectOf(t.db));
  await t.db
    .insert(replicas)
    .values({ ...row, url: "http://10.0.0.9:8080", version: "0.1.0", startedAt: now, heartbeatAt: now });
}

describe("replicas", () => {
  it("GET /v1/replicas lists this replica for the admin, with its heartbeat by the database's clock; others get 403", async () => {
    const t = await createTestApp({
      settings: { ...SHORT, replicaId: "cp-1", publicUrl: "https://cp-1.example:8443" },
    });
    const first = await t.request({ method: "GET", url: "/v1/replicas", token: ADMIN_TOKEN });
    expect(first.statusCode).toBe(200);
    const [me, ...rest] = first.json();
    expect(rest).toEqual([]);
    expect(me).toMatchObject({
      id: "cp-1",
      url: "https://cp-1.example:8443",
      live: true,
      self: true,
      agentsHeld: 0,
      operationsOwned: 0,
    });
    expect(me.version).toMatch(/^\d+\.\d+\.\d+/);
    await sleep(300);
    const [later] = (await t.request({ method: "GET", url: "/v1/replicas", token: ADMIN_TOKEN })).json();
    expect(later.startedAt).toBe(me.startedAt);
    expect(Date.parse(later.lastHeartbeat)).toBeGreaterThan(Date.parse(me.lastHeartbeat));
    expect((await t.request({ method: "GET", url: "/v1/replicas" })).statusCode).toBe(403);
    expect((await t.request({ method: "GET", url: "/v1/replicas", token: null })).statusCode).toBe(403);
  });

  it("/readyz answers 503 while the replica is fenced (its heartbeat cannot be renewed), and 200 again after", async () => {
    const t = await createTestApp({ settings: { ...SHORT, replicaId: "cp-1" } });
    expect((await t.request({ method: "GET", url: "/readyz", token: null })).statusCode).toBe(200);
    const saved = await t.db.select().from(replicas);
    // Another process has taken the id: renewals fail, the deadline passes.
    await t.db.update(replicas).set({ host: "elsewhere.example", pid: 4242 });
    await until(
      "/readyz 503",
      async () => (await t.request({ method: "GET", url: "/readyz", token: null })).statusCode === 503,
    );
    const fenced = await t.request({ method: "GET", url: "/readyz", token: null });
    expect(fenced.json().status).toMatch(/^fenced/);
    // The id given back (an update, not delete+insert: the heartbeat rewrites a missing row at once).
    await t.db.update(replicas).set({ host: saved[0]!.host, pid: saved[0]!.pid });
    await until(
      "/readyz 200",
      async () => (await t.request({ method: "GET", url: "/readyz", token: null })).statusCode === 200,
    );
  });

  it("writes its row again at the next heartbeat when it is missing (never written on a full disk, or removed)", async () => {
    const t = await createTestApp({ settings: { ...SHORT, replicaId: "cp-1" } });
    await t.db.delete(replicas);
    await until("the row written again", async () => (await t.db.select().from(replicas)).length === 1);
    expect((await t.db.select().from(replicas))[0]).toMatchObject({ id: "cp-1", pid: process.pid });
    expect((await t.request({ method: "GET", url: "/readyz", token: null })).statusCode).toBe(200);
  });

  it("takes its id over at a heartbeat from a gone process of this machine whose row the start could not replace (a full disk)", async () => {
    const t = await createTestApp({ settings: { ...SHORT, replicaId: "cp-1" } });
    // What a stop on a full disk leaves, once space returns: the row of the process before, heartbeating lately.
    const dead = spawnSync("true").pid as number;
    await t.db.update(replicas).set({ pid: dead, startedAt: databaseTime(dialectOf(t.db), -60_000) });
    await until("the row taken over", async () => (await t.db.select().from(replicas))[0]?.pid === process.pid);
    expect((await t.request({ method: "GET", url: "/readyz", token: null })).statusCode).toBe(200);
    // Another machine's process is not taken over: the renewal fails and the replica fences itself.
    await t.db.update(replicas).set({ host: "elsewhere.example", pid: 4242 });
    await until(
      "/readyz 503",
      async () => (await t.request({ method: "GET", url: "/readyz", token: null })).statusCode === 503,
    );
    expect((await t.db.select().from(replicas))[0]).toMatchObject({ host: "elsewhere.example", pid: 4242 });
  });

  it("prunes the rows of replicas gone (no graceful stop) for longer than the retention; younger ones stay listed, not live", async () => {
    const t = await createTestApp({ settings: { ...SHORT, replicaId: "cp-1", replicaRetentionMs: 10_000 } });
    const ago = (ms: number) => databaseTime(dialectOf(t.db), -ms);
    const row = { url: "http://10.0.0.9:8080", version: "0.1.0", host: "elsewhere.example", pid: 4242 };
    await t.db.insert(replicas).values([
      { ...row, id: "crashed-long-ago", startedAt: ago(60_000), heartbeatAt: ago(20_000) },
      { ...row, id: "crashed-lately", startedAt: ago(60_000), heartbeatAt: ago(5_000) },
    ]);
    // Pruning runs at most every tenth of the retention (1 s here), with a heartbeat.
    await until(
      "the old row pruned",
      async () => !(await t.db.select().from(replicas)).some((r) => r.id === "crashed-long-ago"),
    );
    const listed = (await t.request({ method: "GET", url: "/v1/replicas", token: ADMIN_TOKEN })).json();
    expect(listed.map((r: { id: string; live: boolean; self: boolean }) => [r.id, r.live, r.self])).toEqual([
      ["cp-1", true, true],
      ["crashed-lately", false, false],
    ]);
  });

  it("refuses a second live holder of one replica id, and on SQLite any second server; a dead process on this machine is no obstacle", async () => {
    const t = await createTestApp({ settings: { ...SHORT, replicaId: "cp-1" } });
    const self = (id: string): ReplicaSelf => ({
      id,
      url: "http://x",
      version: "0.1.0",
      host: hostname(),
      pid: process.pid,
    });
    const dead = spawnSync("true").pid;
    await otherReplica(t, { id: "gone", host: hostname(), pid: dead });
    await otherReplica(t, { id: "cp-2", host: "elsewhere.example", pid: 4242 });

    // The same id as a live replica on another machine: refused on either store.
    const sameId = registerReplica(t.db, { ...self("cp-2"), pid: process.pid }, 3_000);
    await expect(sameId).rejects.toBeInstanceOf(ReplicaRefused);
    await expect(sameId).rejects.toThrow(
      /KEELSON_REPLICA_ID cp-2 is held by a live replica \(pid 4242 on elsewhere\.example|another keelson-server \(replica cp-2, pid 4242 on elsewhere\.example/,
    );

    const another = registerReplica(t.db, self("cp-3"), 3_000);
    if (TEST_DIALECT === "sqlite") {
      await expect(another).rejects.toThrow(
        /another keelson-server \(replica cp-2, pid 4242 on elsewhere\.example.*SQLite serves one server/,
      );
    } else {
      await expect(another).resolves.toBeUndefined();
      // A dead process's row with a fresh heartbeat does not hold its id.
      await expect(registerReplica(t.db, self("gone"), 3_000)).resolves.toBeUndefined();
    }
  });

  it("checks the lease settings against each other; the id defaults to the host name", () => {
    expect(() => readServerSettings({ KEELSON_OPERATION_LEASE_DEADLINE_MS: "10000" })).toThrow(
      new SettingsError(
        "KEELSON_OPERATION_LEASE_DEADLINE_MS: must be less than KEELSON_OPERATION_LEASE_MS (10000), got 10000",
      ),
    );
    expect(() => readServerSettings({ KEELSON_OPERATION_LEASE_RENEW_MS: "4000" })).toThrow(
      /KEELSON_OPERATION_LEASE_RENEW_MS: must be at most half of KEELSON_OPERATION_LEASE_DEADLINE_MS \(7000\), got 4000/,
    );
    expect(() => readServerSettings({ KEELSON_REPLICA_RETENTION_MS: "10000" })).toThrow(
      new SettingsError(
        "KEELSON_REPLICA_RETENTION_MS: must be more than KEELSON_OPERATION_LEASE_MS (10000), got 10000",
      ),
    );
    expect(() => readServerSettings({ KEELSON_REPLICA_ID: "no spaces" })).toThrow(/KEELSON_REPLICA_ID/);
    expect(readServerSettings({}).replicaId).toBe(defaultReplicaId(hostname()));
    expect(defaultReplicaId("cp-1.dc.example")).toBe("cp-1");
    expect(readServerSettings({ KEELSON_REPLICA_ID: "cp-9" }).replicaId).toBe("cp-9");
  });
});
