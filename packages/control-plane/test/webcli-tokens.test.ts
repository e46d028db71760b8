import { mkdtempSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clusters, webcliSpentTokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { spendWebCliToken } from "../src/domain/webcli/spent-tokens.ts";
import { createTestApp, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { allowInserts, refuseInserts } from "./storage-fill.ts";
import { type Client, openSession } from "./webcli-client.ts";

/**
 * A web CLI token opens one session on any replica: it is spent in the database, and given
 * back when its session fails to open (webcli/server.ts says what that means).
 */

async function listening(t: TestApp): Promise<string> {
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  return `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/v1/webcli/session`;
}

async function issueToken(t: TestApp, clusterId: string): Promise<string> {
  const res = await t.request({ method: "POST", url: `/v4/${t.projectId}/webcli/${clusterId}` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().token as string;
}

async function createCluster(t: TestApp, body: Record<string, unknown>): Promise<string> {
  const res = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: body });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().uuid as string;
}

/** The first `ready` or `error` frame, and the close that follows an error. */
async function outcome(client: Client): Promise<Record<string, unknown>> {
  const frame = await client.next("ready");
  if (frame.type === "error") await client.closed;
  return frame;
}

/** A session that opens with `token`: ready for its cluster, then closed. */
async function expectOpens(url: string, token: string, clusterId: string): Promise<void> {
  const client = await openSession(url, token);
  expect(await outcome(client)).toEqual({ type: "ready", cluster: clusterId });
  client.close();
  await client.closed;
}

/** A listening app with a cluster that has an API endpoint, and a web CLI token for it. */
async function tokenOnFreshApp(name: string) {
  const t = await createTestApp();
  const url = await listening(t);
  const clusterId = await createCluster(t, { name, externalDnsName: `${name}.webcli.test` });
  return { t, url, clusterId, token: await issueToken(t, clusterId) };
}

describe("web CLI tokens are spent in the database", () => {
  it("a token that opened a session on one replica is refused by another (PostgreSQL: two live apps; SQLite: the app restarted)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-webcli-tokens-"));
    // Two replicas on one database share the data dir here, so they share the web CLI key too.
    const a = await createTestApp({ dataDir, settings: { replicaId: "cp-a" } });
    const clusterId = await createCluster(a, { name: "wct-one", externalDnsName: "wct-one.webcli.test" });
    const token = await issueToken(a, clusterId);
    const first = await openSession(await listening(a), token);
    expect(await outcome(first)).toEqual({ type: "ready", cluster: clusterId });
    first.close();
    await first.closed;

    let b = a;
    if (TEST_DIALECT === "sqlite") {
      // SQLite serves one replica: the same database under a new process's memory.
      await a.close(true);
      b = await createTestApp({ dataDir, settings: { replicaId: "cp-a" } });
    } else {
      b = await createTestApp({ dataDir, settings: { replicaId: "cp-b" } });
    }
    expect(b).not.toBe(a);
    const urlB = await listening(b);
    const replay = await openSession(urlB, token);
    expect(await outcome(replay)).toMatchObject({ type: "error", code: "token_used" });
    // A fresh token still opens on the other app: the refusal is the spent id, not the app.
    const fresh = await openSession(urlB, await issueToken(b, clusterId));
    expect(await outcome(fresh)).toEqual({ type: "ready", cluster: clusterId });
    fresh.close();
    await fresh.closed;
    expect(await b.db.select().from(webcliSpentTokens)).toHaveLength(2);
    if (b !== a) await b.close(true);
    await a.close();
  });

  it("gives the token back when its session fails to open (no API endpoint yet), and spends it when it opens", async () => {
    const t = await createTestApp();
    const url = await listening(t);
    const clusterId = await createCluster(t, { name: "wct-early" });
    const token = await issueToken(t, clusterId);
    const early = await openSession(url, token);
    expect(await outcome(early)).toMatchObject({ type: "error", code: "no_api_endpoint" });
    expect(await t.db.select().from(webcliSpentTokens)).toEqual([]);

    // The cluster gets its API endpoint (as when its first master attaches; here set directly).
    const [row] = await t.db.select({ spec: clusters.spec }).from(clusters).where(eq(clusters.id, clusterId));
    await t.db
      .update(clusters)
      .set({ spec: { ...row?.spec, externalDnsName: "wct-early.webcli.test" } as typeof clusters.$inferSelect.spec })
      .where(eq(clusters.id, clusterId));
    const later = await openSession(url, token);
    expect(await outcome(later)).toEqual({ type: "ready", cluster: clusterId });
    later.close();
    await later.closed;
    expect(await outcome(await openSession(url, token))).toMatchObject({ type: "error", code: "token_used" });
  });

  it("gives the token back when its cluster is gone, and the retry opens once the cluster is back", async () => {
    const { t, url, clusterId, token } = await tokenOnFreshApp("wct-gone");
    const [row] = await t.db.select().from(clusters).where(eq(clusters.id, clusterId));
    await t.db.delete(clusters).where(eq(clusters.id, clusterId));
    const gone = await openSession(url, token);
    expect(await outcome(gone)).toMatchObject({ type: "error", code: "not_found" });
    expect(await t.db.select().from(webcliSpentTokens)).toEqual([]);
    // The same cluster row again (as a restore would bring it): the token was not used up.
    await t.db.insert(clusters).values(row as typeof clusters.$inferInsert);
    await expectOpens(url, token, clusterId);
    await t.close();
  });

  it("gives the token back when the store fails while the session opens, and the retry opens", async () => {
    const { t, url, clusterId, token } = await tokenOnFreshApp("wct-store");
    // The spend goes through; the session's credential (a cluster access token) is refused.
    await refuseInserts(t, "cluster_access_tokens");
    const failed = await openSession(url, token);
    expect(await outcome(failed)).toMatchObject({ type: "error", code: "unavailable" });
    expect(await t.db.select().from(webcliSpentTokens)).toEqual([]);
    await allowInserts(t, "cluster_access_tokens");
    await expectOpens(url, token, clusterId);
    await t.close();
  });

  it("gives the token back when the socket closes before ready, and the retry opens", async () => {
    const { t, url, clusterId, token } = await tokenOnFreshApp("wct-closed");
    // A spent id already expired: the spend deletes it first, so its absence shows the spend ran.
    const past = new Date(Date.now() - 60_000).toISOString();
    await t.db.insert(webcliSpentTokens).values({ id: "expired-marker", expiresAt: past });
    const early = await openSession(url, token);
    early.close();
    expect(await early.closed).toMatchObject({ code: 1005 });
    await expect
      .poll(async () => (await t.db.select().from(webcliSpentTokens)).map((r) => r.id), { timeout: 5_000 })
      .toEqual([]);
    expect(early.frames).toEqual([]);
    await expectOpens(url, token, clusterId);
    await t.close();
  });

  it("lets exactly one of many sockets spend one token at once", async () => {
    const t = await createTestApp();
    const url = await listening(t);
    const clusterId = await createCluster(t, { name: "wct-race", externalDnsName: "wct-race.webcli.test" });
    const token = await issueToken(t, clusterId);
    const clients = await Promise.all(Array.from({ length: 8 }, () => openSession(url, token)));
    const outcomes = await Promise.all(clients.map(outcome));
    expect(outcomes.filter((o) => o.type === "ready")).toHaveLength(1);
    expect(outcomes.filter((o) => o.code === "token_used")).toHaveLength(7);
    for (const c of clients) c.close();
    await Promise.all(clients.map((c) => c.closed));
  });

  it("forgets spent ids once their tokens expire, at the next spend", async () => {
    const t = await createTestApp();
    const claims = (jti: string, expSeconds: number) => ({
      projectId: t.projectId,
      clusterId: "c",
      subject: "admin",
      iat: expSeconds - 600,
      exp: expSeconds,
      jti,
    });
    const now = new Date("2026-11-26T08:00:00.000Z");
    const s = now.getTime() / 1000;
    expect(await spendWebCliToken(t.db, claims("gone", s - 1), new Date((s - 700) * 1000))).toBe(true);
    expect(await spendWebCliToken(t.db, claims("kept", s + 60), new Date((s - 700) * 1000))).toBe(true);
    expect(await spendWebCliToken(t.db, claims("new", s + 600), now)).toBe(true);
    const ids = (await t.db.select().from(webcliSpentTokens)).map((r) => r.id).sort();
    expect(ids).toEqual(["kept", "new"]);
    expect(await spendWebCliToken(t.db, claims("kept", s + 60), now)).toBe(false);
  });
});
