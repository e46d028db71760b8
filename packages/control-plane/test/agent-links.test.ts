import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { agentLinks, firstRow, nodes } from "@keelson/db";
import { AGENT_CAPABILITIES } from "@keelson/protocol";
import { and, eq, isNotNull } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { dropLink, linksElsewhere, reapLinks, takeLink } from "../src/replicas/links.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { insertHost } from "./node-fixtures.ts";
import { agentOn, replicaRow, SHORT, twoReplicasAndAHost, until } from "./replica-fixtures.ts";

/** The host's link, if a replica holds it (a dropped link's row stays, with no replica and its epoch). */
const linkRow = async (t: TestApp, hostId: string) =>
  firstRow(
    await t.db
      .select()
      .from(agentLinks)
      .where(and(eq(agentLinks.hostId, hostId), isNotNull(agentLinks.replica))),
  );
const connectedFlag = async (t: TestApp, hostId: string) =>
  firstRow(await t.db.select({ c: nodes.agentConnected }).from(nodes).where(eq(nodes.id, hostId)))?.c;

describe("agent_links table", () => {
  it("a take raises the epoch; a drop only removes the holder's own epoch; reaping removes dead replicas' links only", async () => {
    const t = await createTestApp({ runOperations: false, settings: { ...SHORT, replicaId: "cp-a" } });
    const h1 = await insertHost(t.db, t.projectId, { name: "h1" });
    const h2 = await insertHost(t.db, t.projectId, { name: "h2" });
    const h3 = await insertHost(t.db, t.projectId, { name: "h3" });
    expect(await takeLink(t.db, h1.id, "cp-a")).toBe(1);
    expect(await takeLink(t.db, h1.id, "cp-b")).toBe(2);
    expect(await dropLink(t.db, h1.id, "cp-a", 1)).toBe(false);
    expect(await linkRow(t, h1.id)).toMatchObject({ replica: "cp-b", epoch: 2 });
    expect(await dropLink(t.db, h1.id, "cp-b", 2)).toBe(true);
    expect(await linkRow(t, h1.id)).toBeUndefined();

    await replicaRow(t, "cp-live", 0);
    await replicaRow(t, "cp-dead", 60_000);
    // A take after a drop goes on from the dropped epoch: a late notice of the old link (epoch 2)
    // cannot be mistaken for this one.
    expect(await takeLink(t.db, h1.id, "cp-live")).toBe(3);
    await takeLink(t.db, h2.id, "cp-dead");
    await takeLink(t.db, h3.id, "cp-a");
    expect((await linksElsewhere(t.db, "cp-a", 3_000)).map((l) => l.hostId)).toEqual([h1.id]);
    // What a replica reads at start and after a LISTEN gap carries the agent's capabilities.
    await takeLink(t.db, h1.id, "cp-live", ["images", "node-sweep"]);
    expect((await linksElsewhere(t.db, "cp-a", 3_000))[0]?.capabilities).toEqual(["images", "node-sweep"]);
    expect(await reapLinks(t.db, "cp-a", 3_000)).toEqual([{ hostId: h2.id, replica: "cp-dead", epoch: 1 }]);
    expect(await linkRow(t, h2.id)).toBeUndefined();
    expect(await linkRow(t, h3.id)).toMatchObject({ replica: "cp-a" });
    // At its start a replica also removes what its previous process held.
    expect((await reapLinks(t.db, "cp-a", 3_000, true)).map((l) => l.hostId)).toEqual([h3.id]);
    expect(await linkRow(t, h1.id)).toMatchObject({ replica: "cp-live", epoch: 4 });
    expect(await takeLink(t.db, h2.id, "cp-a")).toBe(2);
  });
});

describe("one link per host across replicas", () => {
  it("a host linked to B is connected on A; relinking to A supersedes B's link and the host stays connected", async () => {
    const { a, b, onA, onB, id } = await twoReplicasAndAHost();
    const first = agentOn(onB.link, id);
    const second = agentOn(onA.link, id);
    try {
      expect(await first.connect(10_000)).toBe(true);
      expect(await linkRow(a, id.hostId)).toMatchObject({ replica: "cp-b", epoch: 1 });
      await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(id.hostId));
      expect(b.app.keelson.agents.isConnected(id.hostId)).toBe(true);

      expect(await second.connect(10_000)).toBe(true);
      await until("B closes its older link", () => !first.connected);
      expect(await linkRow(a, id.hostId)).toMatchObject({ replica: "cp-a", epoch: 2 });
      await until("B sees the link A holds", () => b.app.keelson.agents.isConnected(id.hostId));
      expect(a.app.keelson.agents.isConnected(id.hostId)).toBe(true);
      // B's close of its superseded link does not mark the host disconnected.
      await sleep(200);
      await a.app.keelson.agents.flushPresence();
      await b.app.keelson.agents.flushPresence();
      expect(await connectedFlag(a, id.hostId)).toBe(1);

      await second.stop();
      await until("the link row gone", async () => (await linkRow(a, id.hostId)) === undefined);
      await until("B no longer sees a link", () => !b.app.keelson.agents.isConnected(id.hostId));
      await until("the host marked disconnected", async () => {
        await a.app.keelson.agents.flushPresence();
        return (await connectedFlag(a, id.hostId)) === 0;
      });
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  it("a host linked to B is among A's connected hosts of its project, and A's ping reaches it; A knows its capabilities from B's record", async () => {
    const { a, b, onB, id } = await twoReplicasAndAHost();
    const agent = agentOn(onB.link, id);
    try {
      expect(a.app.keelson.agents.connectedHosts(a.projectId)).toEqual([]);
      expect(await agent.connect(10_000)).toBe(true);
      await until("A sees the link B holds", () => a.app.keelson.agents.connectedHosts(a.projectId).length === 1);
      expect(a.app.keelson.agents.connectedHosts(a.projectId)).toEqual([id.hostId]);
      expect(a.app.keelson.agents.connectedHosts()).toEqual([id.hostId]);
      expect(a.app.keelson.agents.connectedHosts(randomUUID())).toEqual([]);
      expect(b.app.keelson.agents.connectedHosts(a.projectId)).toEqual([id.hostId]);
      // The hello was B's; B recorded what it declared with the link, and told A.
      expect(b.app.keelson.agents.supports(id.hostId, AGENT_CAPABILITIES.nodePackages)).toBe(true);
      expect(a.app.keelson.agents.supports(id.hostId, AGENT_CAPABILITIES.nodePackages)).toBe(true);
      expect(a.app.keelson.agents.supports(id.hostId, "not-a-capability")).toBe(false);

      const res = await a.request({
        method: "POST",
        url: "/v1/agents/ping",
        payload: { projectId: a.projectId },
        token: ADMIN_TOKEN,
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ hosts: 1, ok: 1, failed: 0, timedOut: 0, offline: 0 });

      await agent.stop();
      await until("A no longer lists the host", () => a.app.keelson.agents.connectedHosts(a.projectId).length === 0);
      expect(a.app.keelson.agents.supports(id.hostId, AGENT_CAPABILITIES.nodePackages)).toBeUndefined();
    } finally {
      await agent.stop();
    }
  });

  it("the links of a replica whose heartbeat ran out are reaped by a live one, and their hosts marked disconnected", async () => {
    const t = await createTestApp({ runOperations: true, settings: { ...SHORT, replicaId: "cp-a" } });
    const host = await insertHost(t.db, t.projectId, { name: "h1", agentConnected: 1 });
    await replicaRow(t, "cp-dead", 0);
    await takeLink(t.db, host.id, "cp-dead");
    // cp-dead never heartbeats again: its row ages past the 3 s lease.
    expect(await linkRow(t, host.id)).toMatchObject({ replica: "cp-dead" });
    await until("the dead replica's link reaped", async () => (await linkRow(t, host.id)) === undefined, 8_000);
    // Then (the next statement of the same heartbeat) the host is marked disconnected.
    await until("the host marked disconnected", async () => (await connectedFlag(t, host.id)) === 0, 2_000);
    expect(t.app.keelson.agents.isConnected(host.id)).toBe(false);
  });

  it("a starting replica keeps hosts linked to another live replica connected, and marks the rest disconnected", async () => {
    const t = await createTestApp({ runOperations: false, settings: { ...SHORT, replicaId: "cp-a" } });
    const linked = await insertHost(t.db, t.projectId, { name: "linked", agentConnected: 1 });
    const stale = await insertHost(t.db, t.projectId, { name: "stale", agentConnected: 1 });
    const own = await insertHost(t.db, t.projectId, { name: "own", agentConnected: 1 });
    await replicaRow(t, "cp-live", 0);
    await takeLink(t.db, linked.id, "cp-live");
    await takeLink(t.db, own.id, "cp-c");
    const c = await createTestApp({
      runOperations: false,
      dataDir: t.dataDir,
      settings: { ...SHORT, replicaId: "cp-c" },
    });
    const closeC = c.close.bind(c);
    c.close = () => closeC(true);
    expect(await connectedFlag(t, linked.id)).toBe(1);
    expect(await connectedFlag(t, stale.id)).toBe(0);
    // Its own previous process's link is gone with it.
    expect(await connectedFlag(t, own.id)).toBe(0);
    expect(await linkRow(t, own.id)).toBeUndefined();
    expect(c.app.keelson.agents.isConnected(linked.id)).toBe(true);
    expect(c.app.keelson.agents.isConnected(stale.id)).toBe(false);
  });
});
