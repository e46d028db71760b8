import { events } from "@keelson/db";
import type { StreamEvent } from "@keelson/protocol/event-stream";
import { and, asc, eq, gt, max } from "drizzle-orm";
import { expect } from "vitest";
import { followEvents, type LiveEvent } from "../../console/src/events.ts";
import type { TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";

/** What the tests of events-stream clients (CLI, console) compare what they got with: the events table. */

/** The newest stored event id, once every event recorded so far was delivered to the streams. */
export async function newestEventId(t: TestApp): Promise<number> {
  await t.app.keelson.projectEvents.settled();
  const [row] = await t.db.select({ id: max(events.id) }).from(events);
  return Number(row?.id ?? 0);
}

/** The project's stored events after `after`, oldest first, as the stream sends them. */
export async function storedEventsAfter(t: TestApp, after: number): Promise<StreamEvent[]> {
  const rows = await t.db
    .select()
    .from(events)
    .where(and(eq(events.projectId, t.projectId), gt(events.id, after)))
    .orderBy(asc(events.id));
  return rows.map((r) => ({ id: String(r.id), name: r.type, data: JSON.parse(r.payload) }));
}

/** Creates a cluster (no nodes: its operation ends at once); its id. */
export async function createCluster(t: TestApp, name: string): Promise<string> {
  const res = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().uuid as string;
}

/** Waits until `got` holds the end of an operation on `clusterId`. */
export const finishedOn = (got: StreamEvent[], clusterId: string) =>
  waitFor(
    `operation.finished of ${clusterId}`,
    () => got.find((e) => e.name === "operation.finished" && e.data.targetId === clusterId),
    15_000,
  );

/**
 * The project's stream followed as a console page does (packages/console/src/events.ts) from
 * `base`: what it got, how often it was told to read its resources again, why it gave up.
 */
export function followAsPage(t: TestApp, base: string, giveUpMs?: number) {
  const got: LiveEvent[] = [];
  const seen = { reloads: 0, gaveUp: undefined as Error | undefined };
  const stop = followEvents(
    { projectId: t.projectId, token: t.token },
    (e) => got.push(e),
    () => seen.reloads++,
    {
      base,
      ...(giveUpMs === undefined ? {} : { giveUpMs }),
      onGiveUp: (error) => {
        seen.gaveUp = error;
      },
    },
  );
  return { got, seen, stop };
}
