import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { agentCommands, databaseTime, dialectOf, firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CommandTimeoutError } from "../src/agents/errors.ts";
import {
  answerOf,
  insertCommands,
  markSent,
  type NewCommand,
  pruneCommands,
  recordAnswers,
  releaseClaim,
} from "../src/replicas/commands.ts";
import { createTestApp, type TestApp } from "./helpers.ts";
import { insertHost } from "./node-fixtures.ts";
import { agentOn, twoReplicasAndAHost, until } from "./replica-fixtures.ts";

const commandRow = async (t: TestApp, id: string) =>
  firstRow(await t.db.select().from(agentCommands).where(eq(agentCommands.id, id)));

/** A running operation claimed with `fence` by a replica whose lease runs (no test app's runner takes it). */
async function runningOperation(t: TestApp, fence: number): Promise<string> {
  const id = randomUUID();
  await t.db.insert(operations).values({
    id,
    projectId: t.projectId,
    kind: "test",
    targetType: "cluster",
    targetId: randomUUID(),
    params: {},
    state: "running",
    owner: "cp-elsewhere",
    leaseUntil: databaseTime(dialectOf(t.db), 600_000),
    fence,
  });
  return id;
}

const command = (hostId: string, fields: Partial<NewCommand> = {}): NewCommand => ({
  id: randomUUID(),
  hostId,
  name: "ping",
  payload: {},
  timeoutMs: 60_000,
  operationId: null,
  fence: null,
  ...fields,
});

describe("agent_commands table", () => {
  it("is sent only while unanswered, unexpired and under its operation's fence; an answered id keeps its answer when issued again", async () => {
    const t = await createTestApp({ runOperations: false });
    const host = await insertHost(t.db, t.projectId, { name: "h1" });
    const other = await insertHost(t.db, t.projectId, { name: "h2" });
    const op = await runningOperation(t, 3);
    const current = command(host.id, { operationId: op, fence: 3 });
    const stale = command(host.id, { operationId: op, fence: 2 });
    const plain = command(host.id);
    const expired = command(host.id, { timeoutMs: 1 });
    const issued = await insertCommands(t.db, [current, stale, plain, expired]);
    expect(issued.map((r) => r.state)).toEqual(["pending", "pending", "pending", "pending"]);
    await sleep(20);
    // One statement for the host's unanswered commands: the stale fence and the expired one stay.
    const sent = await markSent(t.db, { hostIds: [host.id] });
    expect(sent.map((r) => r.id).sort()).toEqual([current.id, plain.id].sort());
    expect(await markSent(t.db, { ids: [stale.id, expired.id] })).toEqual([]);
    expect((await commandRow(t, stale.id))?.state).toBe("pending");

    // Only the host the command went to may answer it, and only once.
    const answer = { ok: true, result: { at: "then" } };
    expect(await recordAnswers(t.db, [{ id: plain.id, hostId: other.id, result: answer }])).toEqual(new Set());
    expect(await recordAnswers(t.db, [{ id: plain.id, hostId: host.id, result: answer }])).toEqual(new Set([plain.id]));
    expect(
      await recordAnswers(t.db, [{ id: plain.id, hostId: host.id, result: { ok: true, result: { at: "x" } } }]),
    ).toEqual(new Set());
    expect(await answerOf(t.db, [plain.id, current.id])).toEqual([{ id: plain.id, result: answer }]);

    // Issued again (a step run again): the answer stands; an unanswered one waits again, new fence.
    const again = await insertCommands(t.db, [
      { ...plain, timeoutMs: 60_000 },
      { ...stale, fence: 3 },
    ]);
    expect(again.find((r) => r.id === plain.id)).toMatchObject({ state: "answered", result: answer });
    expect(again.find((r) => r.id === stale.id)).toMatchObject({ state: "pending" });
    expect((await markSent(t.db, { ids: [stale.id] })).map((r) => r.id)).toEqual([stale.id]);

    // The operation's fence moves on (another claim): nothing of it is sent any more.
    await t.db.update(operations).set({ fence: 4 }).where(eq(operations.id, op));
    expect(await markSent(t.db, { hostIds: [host.id] })).toEqual([]);
  });

  it("a claimed command is inserted as sent when its fence holds, pending otherwise; a released claim is pending again", async () => {
    const t = await createTestApp({ runOperations: false });
    const host = await insertHost(t.db, t.projectId, { name: "h1" });
    const op = await runningOperation(t, 3);
    const current = command(host.id, { operationId: op, fence: 3, claim: true });
    const stale = command(host.id, { operationId: op, fence: 2, claim: true });
    const plain = command(host.id, { claim: true });
    const unclaimed = command(host.id);
    const issued = await insertCommands(t.db, [current, stale, plain, unclaimed]);
    expect(issued.map((r) => r.state)).toEqual(["sent", "pending", "sent", "pending"]);
    // Claimed: no send claims it again; the stale one stays held back by its fence.
    expect(await markSent(t.db, { ids: [current.id, stale.id, plain.id] })).toEqual([]);
    await releaseClaim(t.db, plain.id);
    expect((await markSent(t.db, { ids: [plain.id] })).map((r) => r.id)).toEqual([plain.id]);
    // Issued again, claimed, after its operation's fence moved on: pending, never sent.
    await t.db.update(operations).set({ fence: 4 }).where(eq(operations.id, op));
    expect((await insertCommands(t.db, [current]))[0]?.state).toBe("pending");
    expect((await commandRow(t, current.id))?.state).toBe("pending");
  });

  it("prunes commands whose expiry is older than the retention, and keeps the others", async () => {
    const t = await createTestApp({ runOperations: false });
    const host = await insertHost(t.db, t.projectId, { name: "h1" });
    const old = command(host.id);
    const fresh = command(host.id);
    await insertCommands(t.db, [old, fresh]);
    await t.db
      .update(agentCommands)
      .set({ expiresAt: databaseTime(dialectOf(t.db), -120_000) })
      .where(eq(agentCommands.id, old.id));
    expect(await pruneCommands(t.db, 60_000)).toBe(1);
    expect(await commandRow(t, old.id)).toBeUndefined();
    expect(await commandRow(t, fresh.id)).toBeDefined();
  });
});

describe("commands across replicas", () => {
  it("a command issued on A for a host linked to B is sent by B, and its result reaches A", async () => {
    const { a, onB, id } = await twoReplicasAndAHost();
    const agent = agentOn(onB.link, id);
    try {
      expect(await agent.connect(10_000)).toBe(true);
      await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(id.hostId));
      const result = await a.app.keelson.agents.sendCommand(id.hostId, "ping", {}, { id: "cmd-1", timeoutMs: 5_000 });
      expect(result).toEqual({ at: expect.any(String) });
      expect(agent.commands).toBe(1);
      expect(await commandRow(a, "cmd-1")).toMatchObject({ state: "answered", hostId: id.hostId });
    } finally {
      await agent.stop();
    }
  });

  it("an agent that links again to another replica gets its unanswered command with the same id; the issuer gets the answer", async () => {
    const { a, onA, onB, id } = await twoReplicasAndAHost();
    // Takes the command and dies before answering.
    const slow = agentOn(onB.link, id, { latencyMs: 60_000 });
    const next = agentOn(onA.link, id);
    try {
      expect(await slow.connect(10_000)).toBe(true);
      await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(id.hostId));
      const result = a.app.keelson.agents.sendCommand(id.hostId, "ping", {}, { id: "cmd-2", timeoutMs: 10_000 });
      await until("B sent it", () => slow.commands === 1);
      slow.kill();
      expect(await next.connect(10_000)).toBe(true);
      await expect(result).resolves.toEqual({ at: expect.any(String) });
      expect(next.commands).toBe(1);
      expect(await commandRow(a, "cmd-2")).toMatchObject({ state: "answered" });
    } finally {
      await slow.stop();
      await next.stop();
    }
  });

  it("a command carrying a stale fence is never sent: the issuer times out and the agent sees nothing", async () => {
    const { a, onB, id } = await twoReplicasAndAHost();
    const op = await runningOperation(a, 5);
    const agent = agentOn(onB.link, id);
    try {
      expect(await agent.connect(10_000)).toBe(true);
      await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(id.hostId));
      const stale = a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-3", timeoutMs: 500, issuer: { operationId: op, fence: 4 } },
      );
      await expect(stale).rejects.toBeInstanceOf(CommandTimeoutError);
      expect(agent.commands).toBe(0);
      expect(await commandRow(a, "cmd-3")).toMatchObject({ state: "expired" });
      // The same on the issuer's own links, and one under the current fence goes out.
      const current = await a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-4", timeoutMs: 5_000, issuer: { operationId: op, fence: 5 } },
      );
      expect(current).toEqual({ at: expect.any(String) });
      expect(agent.commands).toBe(1);
    } finally {
      await agent.stop();
    }
  });

  it("a command to a host linked to the issuer goes out once under the current fence, never under a stale one", async () => {
    const { a, onA, id } = await twoReplicasAndAHost();
    const op = await runningOperation(a, 5);
    const agent = agentOn(onA.link, id);
    try {
      expect(await agent.connect(10_000)).toBe(true);
      const stale = a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-local-1", timeoutMs: 500, issuer: { operationId: op, fence: 4 } },
      );
      await expect(stale).rejects.toBeInstanceOf(CommandTimeoutError);
      expect(agent.commands).toBe(0);
      const current = await a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-local-2", timeoutMs: 5_000, issuer: { operationId: op, fence: 5 } },
      );
      expect(current).toEqual({ at: expect.any(String) });
      expect(agent.commands).toBe(1);
      expect(await commandRow(a, "cmd-local-2")).toMatchObject({ state: "answered" });
    } finally {
      await agent.stop();
    }
  });

  it("an id issued again under the operation's newer claim while its first issue still waits goes out, and both calls get the answer", async () => {
    const { a, onB, id } = await twoReplicasAndAHost();
    const op = await runningOperation(a, 7);
    const agent = agentOn(onB.link, id);
    try {
      expect(await agent.connect(10_000)).toBe(true);
      await until("A sees the link B holds", () => a.app.keelson.agents.isConnected(id.hostId));
      // Issued under a claim the operation has since lost (its lease ran out while the database
      // was away): the row is held back by the fence check.
      const first = a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-5", timeoutMs: 10_000, issuer: { operationId: op, fence: 6 } },
      );
      await until("its row is written", async () => (await commandRow(a, "cmd-5"))?.fence === 6);
      await sleep(200);
      expect(agent.commands).toBe(0);
      // The step runs again under the current claim, same id: it joins the first wait, and the
      // row now carries the current fence, so it is sent.
      const again = a.app.keelson.agents.sendCommand(
        id.hostId,
        "ping",
        {},
        { id: "cmd-5", timeoutMs: 10_000, issuer: { operationId: op, fence: 7 } },
      );
      const [one, two] = await Promise.all([first, again]);
      expect(two).toEqual(one);
      expect(one).toEqual({ at: expect.any(String) });
      expect(agent.commands).toBe(1);
      expect(await commandRow(a, "cmd-5")).toMatchObject({ state: "answered", fence: 7 });
    } finally {
      await agent.stop();
    }
  });
});
