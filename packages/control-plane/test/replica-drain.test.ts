import { hostname } from "node:os";
import { agentLinks, firstRow, replicas } from "@keelson/db";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { registerReplica } from "../src/replicas/registry.ts";
import { ADMIN_TOKEN, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { agentOn, replicaRow, twoReplicasAndAHost, until } from "./replica-fixtures.ts";

/** `POST /v1/replicas/{id}/drain` (issue 17): two replicas on one database, an agent linked to the drained one. */

const drain = (t: TestApp, id: string, token: string | undefined = ADMIN_TOKEN) =>
  t.request({ method: "POST", url: `/v1/replicas/${id}/drain`, ...(token ? { token } : {}) });
const list = async (t: TestApp) =>
  (await t.request({ url: "/v1/replicas", token: ADMIN_TOKEN })).json() as {
    id: string;
    draining: boolean;
    drainingSince: string | null;
    agentsHeld: number;
    operationsOwned: number;
  }[];
const drainingSince = async (t: TestApp, id: string) =>
  firstRow(await t.db.select({ d: replicas.drainingSince }).from(replicas).where(eq(replicas.id, id)))?.d;

/** A raw link socket: resolves the close (code, reason) or the refusal of the upgrade (status, body). */
function rawLink(link: string, credential: string) {
  const ws = new WebSocket(link, { headers: { authorization: `Bearer ${credential}` } });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  const ended = new Promise<{ code?: number; reason?: string; status?: number; body?: string }>((resolve) => {
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
  });
  return { ws, opened, ended };
}

describe("replica drain", () => {
  it("refuses an unknown id (404), a replica that is not live or the last live one (409), a project token (403), and changes nothing", async () => {
    const { a, b } = await twoReplicasAndAHost();
    try {
      await replicaRow(a, "cp-dead", 60_000);
      const unknown = await drain(a, "cp-nope");
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toMatchObject({ code: "not_found", message: "replica cp-nope does not exist" });
      const dead = await drain(a, "cp-dead");
      expect(dead.statusCode).toBe(409);
      expect(dead.json()).toMatchObject({ code: "replica_gone" });
      expect(dead.json().message).toContain("cp-dead is not live");
      expect((await drain(a, "cp-b", a.token)).statusCode).toBe(403);
      expect(await drainingSince(a, "cp-b")).toBeNull();

      expect((await drain(a, "cp-b")).statusCode).toBe(202);
      // B drains: A is the last live replica that does not.
      const last = await drain(b, "cp-a");
      expect(last.statusCode).toBe(409);
      expect(last.json()).toMatchObject({ code: "last_replica" });
      expect(last.json().message).toContain("cp-a is the last live replica");
      expect(await drainingSince(a, "cp-a")).toBeNull();
      expect((await a.request({ url: "/readyz", token: null })).statusCode).toBe(200);
      // Asked again: the same answer, the same mark.
      const since = await drainingSince(a, "cp-b");
      expect((await drain(a, "cp-b")).statusCode).toBe(202);
      expect(await drainingSince(a, "cp-b")).toBe(since);
    } finally {
      await b.close();
      await a.close();
    }
  });

  // PostgreSQL: the replicas' store. Two apps of one process on one SQLite file cannot race
  // (better-sqlite3 waits for a lock synchronously, holding the thread the other app needs).
  it.runIf(TEST_DIALECT === "postgres")(
    "two drains at once, of A through B and of B through A: one is taken, the other is refused as the last replica",
    async () => {
      const { a, b } = await twoReplicasAndAHost();
      try {
        for (let round = 0; round < 5; round++) {
          const answers = await Promise.all([drain(b, "cp-a"), drain(a, "cp-b")]);
          const codes = answers.map((r) => r.statusCode).sort();
          expect(codes).toEqual([202, 409]);
          expect(answers.find((r) => r.statusCode === 409)?.json()).toMatchObject({ code: "last_replica" });
          const marked = [await drainingSince(a, "cp-a"), await drainingSince(a, "cp-b")].filter((d) => d !== null);
          expect(marked).toHaveLength(1);
          await a.db.update(replicas).set({ drainingSince: null });
        }
      } finally {
        await b.close();
        await a.close();
      }
    },
  );

  it("asked through A, B answers /readyz 503 draining, closes its agent links with going-away and refuses new ones; the agent links to A; B's restart ends the drain", async () => {
    const { a, b, onA, onB, id } = await twoReplicasAndAHost();
    const agent = agentOn(onB.link, id);
    const raw = rawLink(onB.link, id.credential);
    try {
      expect(await agent.connect(10_000)).toBe(true);
      await raw.opened;
      expect((await list(a)).find((r) => r.id === "cp-b")).toMatchObject({ draining: false, drainingSince: null });

      const asked = await drain(a, "cp-b");
      expect(asked.statusCode, asked.body).toBe(202);
      expect(asked.json()).toMatchObject({ id: "cp-b", draining: true });
      expect(asked.json().drainingSince).toEqual(expect.any(String));

      // B hears it (a notification, else its next heartbeat) and closes every link with going-away.
      expect(await raw.ended).toEqual({
        code: 1001,
        reason: "this control-plane replica is draining: link to another replica",
      });
      await until("the agent's link closed", () => !agent.connected);
      await until(
        "B answers /readyz 503",
        async () => (await b.request({ url: "/readyz", token: null })).statusCode === 503,
      );
      expect((await b.request({ url: "/readyz", token: null })).json()).toEqual({ status: "draining" });
      expect((await a.request({ url: "/readyz", token: null })).statusCode).toBe(200);
      // The API still answers on B.
      expect((await b.request({ url: "/v1/replicas", token: ADMIN_TOKEN })).statusCode).toBe(200);

      const again = rawLink(onB.link, id.credential);
      const refused = await again.ended;
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body ?? "{}")).toMatchObject({ code: "draining" });

      await until("the link row gone", async () => {
        const row = firstRow(await a.db.select().from(agentLinks).where(eq(agentLinks.hostId, id.hostId)));
        return row === undefined || row.replica !== "cp-b";
      });
      const moved = agentOn(onA.link, id);
      try {
        expect(await moved.connect(10_000)).toBe(true);
        await until(
          "B's row holds no agent after a heartbeat",
          async () => (await list(a)).find((r) => r.id === "cp-b")?.agentsHeld === 0,
        );
        expect((await list(a)).find((r) => r.id === "cp-b")).toMatchObject({ draining: true, operationsOwned: 0 });
        expect((await list(a)).find((r) => r.id === "cp-a")).toMatchObject({ draining: false, agentsHeld: 1 });
      } finally {
        await moved.stop();
      }

      // B's process starting again on its id (as its restart does): back in service.
      await registerReplica(
        b.db,
        { id: "cp-b", url: onB.base, version: "0.0.0", host: hostname(), pid: process.pid },
        3_000,
      );
      expect(await drainingSince(a, "cp-b")).toBeNull();
    } finally {
      raw.ws.terminate();
      await agent.stop();
      await b.close();
      await a.close();
    }
  });
});
