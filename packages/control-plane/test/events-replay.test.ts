import { databaseTime, dialectOf, events } from "@keelson/db";
import { asc, eq, gt } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { EventLog } from "../src/domain/events/event-log.ts";
import { createTestApp, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";
import { listening, SHORT } from "./replica-fixtures.ts";
import { openStream, type SseEvent } from "./sse-client.ts";

/** The events of `stream` with an id above `after`, as id, name and data. */
const after = (stream: { events: SseEvent[] }, id: number) => stream.events.filter((e) => (e.id ?? 0) > id);

const apps: TestApp[] = [];
afterEach(async () => {
  // The second app of a pair shares the first's data: closed first, keeping it.
  const opened = apps.splice(0).reverse();
  for (const [i, t] of opened.entries()) await t.close(i < opened.length - 1);
});

async function app(settings: Partial<TestApp["settings"]> = {}, dataDir?: string, runOperations = true) {
  const t = await createTestApp({
    ...(dataDir ? { dataDir } : {}),
    runOperations,
    settings: { ...SHORT, ...settings },
  });
  apps.push(t);
  return t;
}

/** Creates a cluster through `t`'s API; its id once the operation ended. */
async function cluster(t: TestApp, name: string): Promise<string> {
  const res = await t.app.inject({
    method: "POST",
    url: `/v4/${t.projectId}/clusters`,
    headers: { "x-auth-token": t.token },
    payload: { name },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().uuid as string;
}

const finished = (stream: { events: SseEvent[] }, clusterId: string) =>
  waitFor(`operation.finished of ${clusterId}`, () =>
    stream.events.find((e) => e.event === "operation.finished" && e.data.targetId === clusterId),
  );

describe("the events table", () => {
  it("takes the events that arrive together in one statement, ids in arrival order", async () => {
    const t = await app({}, undefined, false);
    const log = new EventLog(t.db, "cp-test");
    const before = t.store.statements();
    const ids = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) =>
        log.append({ projectId: t.projectId, type: "test", payload: `{"n":${i}}` }),
      ),
    );
    expect(t.store.statements() - before).toBe(1);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(1_000);
    const rows = await t.db
      .select()
      .from(events)
      .where(gt(events.id, (ids[0] as number) - 1))
      .orderBy(asc(events.id));
    expect(rows.map((r) => JSON.parse(r.payload).n)).toEqual(Array.from({ length: 1_000 }, (_, i) => i));
    expect(rows.every((r) => r.replica === "cp-test" && r.type === "test")).toBe(true);
  });

  it("prunes rows past the retention or beyond the row limit, keeping the newest", async () => {
    const t = await app({}, undefined, false);
    const log = new EventLog(t.db, "cp-test");
    const first = await log.append({ projectId: t.projectId, type: "old", payload: "{}" });
    const ids = await Promise.all(
      Array.from({ length: 20 }, () => log.append({ projectId: t.projectId, type: "new", payload: "{}" })),
    );
    // The first row is two hours old by the database's clock.
    await t.db
      .update(events)
      .set({ createdAt: databaseTime(dialectOf(t.db), -7_200_000) })
      .where(eq(events.id, first));
    expect(await log.prune(3_600_000, 1_000_000)).toBe(1);
    expect((await log.bounds()).oldest).toBe(ids[0]);
    // Past the row limit: the oldest beyond the newest 5 go.
    expect(await log.prune(3_600_000, 5)).toBe(15);
    expect(await log.bounds()).toEqual({ oldest: ids[15], newest: ids[19] });
    // Past the retention, all of them: the newest stays, to tell how far ids went.
    await t.db.update(events).set({ createdAt: databaseTime(dialectOf(t.db), -7_200_000) });
    expect(await log.prune(3_600_000, 1_000_000)).toBe(4);
    expect(await log.bounds()).toEqual({ oldest: ids[19], newest: ids[19] });
  });
});

describe("GET /v4/{project_uuid}/events with Last-Event-ID", () => {
  it("refuses an id that is not one, naming the field, and changes nothing", async () => {
    const t = await app({}, undefined, false);
    const before = await new EventLog(t.db, "x").bounds();
    for (const [headers, query, field] of [
      [{ "last-event-id": "abc" }, "", "Last-Event-ID"],
      [{ "last-event-id": "-1" }, "", "Last-Event-ID"],
      [{ "last-event-id": "1.5" }, "", "Last-Event-ID"],
      [{ "last-event-id": "99999999999999999" }, "", "Last-Event-ID"],
      [{}, "?lastEventId=x1", "lastEventId"],
    ] as const) {
      const res = await t.app.inject({
        method: "GET",
        url: `/v4/${t.projectId}/events${query}`,
        headers: { "x-auth-token": t.token, ...headers },
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ code: "invalid_field", field });
      expect(res.json().message).toContain(field);
    }
    expect(await new EventLog(t.db, "x").bounds()).toEqual(before);
    // 0 is "before the first event": on a database with none, nothing was lost.
    expect(before).toEqual({ oldest: null, newest: null });
    const { base } = await listening(t);
    const fromZero = await openStream(`${base}/v4/${t.projectId}/events`, t.token, { "last-event-id": "0" });
    expect(fromZero.status).toBe(200);
    t.app.keelson.runner.events.emit("event", {
      type: "operation.step",
      operationId: "op-1",
      projectId: t.projectId,
      kind: "test",
      targetId: "t-1",
      state: "running",
      step: "one",
    });
    await waitFor("the live event", () => fromZero.events.length > 0);
    expect(fromZero.events.map((e) => e.event)).toEqual(["operation.step"]);
    fromZero.close();
  });

  it("replays exactly the missed events of the project, in order, then the live ones; a pruned id gets events.lost", async () => {
    const t = await app();
    const { base } = await listening(t);
    const url = `${base}/v4/${t.projectId}/events`;
    // A witness stream stays open throughout: what the reconnecting client should get.
    const witness = await openStream(url, t.token);
    const other = await openStream(`${base}/v4/${t.otherProjectId}/events`, t.otherToken);
    const first = await openStream(url, t.token);
    const one = await cluster(t, "replay-1");
    await finished(first, one);
    const lastSeen = first.events.at(-1)?.id as number;
    expect(lastSeen).toBeGreaterThan(0);
    first.close();
    const two = await cluster(t, "replay-2");
    await finished(witness, two);
    const missed = after(witness, lastSeen);
    expect(missed.map((e) => e.data.targetId)).toContain(two);

    const again = await openStream(url, t.token, { "last-event-id": String(lastSeen) });
    await waitFor("the replay", () => again.events.length >= missed.length);
    expect(again.events).toEqual(missed);
    // Then live: the next operation's events, once each.
    const three = await cluster(t, "replay-3");
    await finished(again, three);
    await finished(witness, three);
    expect(again.events).toEqual(after(witness, lastSeen));
    const ids = again.events.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => (a as number) - (b as number)));
    expect(new Set(ids).size).toBe(ids.length);
    // The query parameter, for clients that cannot send the header, says the same.
    const byQuery = await openStream(`${url}?lastEventId=${lastSeen}`, t.token);
    await waitFor("the replay by query", () => byQuery.events.length >= again.events.length);
    expect(byQuery.events).toEqual(again.events);
    expect(other.events).toEqual([]);

    // Pruned past the id: the stream opens with events.lost (no id), then follows live.
    await t.app.keelson.eventLog.prune(0, 1_000_000);
    const late = await openStream(url, t.token, { "last-event-id": String(lastSeen) });
    await waitFor("events.lost", () => late.events.length > 0);
    expect(late.events[0]).toMatchObject({ event: "events.lost", data: { lastEventId: lastSeen } });
    expect(late.events[0]?.id).toBeUndefined();
    expect(String(late.events[0]?.data.message)).toContain("retention");
    const four = await cluster(t, "replay-4");
    await finished(late, four);
    expect(late.events.slice(1).every((e) => e.data.targetId === four)).toBe(true);
    // An id this database never gave (a restored or other database) is lost too.
    const future = await openStream(url, t.token, { "last-event-id": "900000000" });
    await waitFor("events.lost", () => future.events.length > 0);
    expect(String(future.events[0]?.data.message)).toContain("unknown");
    for (const s of [witness, other, again, byQuery, late, future]) s.close();
  });
});

describe("a new stream's opening id", () => {
  it("names the newest event, so a client dropped before its first event resumes from it without a gap", async () => {
    const t = await app();
    const { base } = await listening(t);
    const url = `${base}/v4/${t.projectId}/events`;
    await finished(await openStream(url, t.token), await cluster(t, "before-open"));
    await t.app.keelson.projectEvents.settled();
    const newest = (await t.app.keelson.eventLog.bounds()).newest as number;
    const fresh = await openStream(url, t.token);
    // A block with an id and no data: an EventSource (and the CLI, the console) keep it as Last-Event-ID.
    await waitFor("the opening id", () => /^: keelson events\n\nid: \d+\n\n/.test(fresh.body()));
    expect(fresh.body()).toMatch(new RegExp(`^: keelson events\n\nid: ${newest}\n\n`));
    expect(fresh.events).toEqual([]);
    fresh.close();
    // Dropped before any event: what happens next is replayed from the opening id.
    const gap = await cluster(t, "in-gap");
    const witness = await openStream(url, t.token, { "last-event-id": "0" });
    await finished(witness, gap);
    const resumed = await openStream(url, t.token, { "last-event-id": String(newest) });
    await finished(resumed, gap);
    expect(resumed.events).toEqual(after(witness, newest));
    expect(resumed.events.some((e) => e.data.targetId === gap)).toBe(true);
    for (const s of [witness, resumed]) s.close();
  });
});

describe("events of another replica", () => {
  it(`reach a stream on replica B when the operation runs on replica A (${TEST_DIALECT})`, async () => {
    const a = await app({ replicaId: "cp-a" });
    // B runs no operations: whatever B's stream shows of one ran on A.
    const b = await app({ replicaId: "cp-b" }, a.dataDir, false);
    const onA = await listening(a);
    const onB = await listening(b);
    const streamA = await openStream(`${onA.base}/v4/${a.projectId}/events`, a.token);
    const streamB = await openStream(`${onB.base}/v4/${b.projectId}/events`, b.token);
    const clusterId = await cluster(a, "across");
    await finished(streamA, clusterId);
    const onAIds = streamA.events.filter((e) => e.data.targetId === clusterId);
    // Each event once on A, in id order.
    expect(new Set(onAIds.map((e) => e.id)).size).toBe(onAIds.length);
    if (TEST_DIALECT === "postgres") {
      await finished(streamB, clusterId);
      expect(streamB.events.filter((e) => e.data.targetId === clusterId)).toEqual(onAIds);
      // Reconnecting to B with an id A gave: what came after it, from the table.
      const mid = onAIds[0]?.id as number;
      const resumed = await openStream(`${onB.base}/v4/${b.projectId}/events`, b.token, {
        "last-event-id": String(mid),
      });
      await waitFor("the replay on B", () => resumed.events.length >= onAIds.length - 1);
      expect(resumed.events).toEqual(onAIds.slice(1));
      resumed.close();
    } else {
      // SQLite serves one replica: nothing is read back from the table for a live stream.
      await b.app.keelson.projectEvents.settled();
      expect(streamB.events).toEqual([]);
    }
    streamA.close();
    streamB.close();
  });
});
