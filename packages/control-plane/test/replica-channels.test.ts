import type { Store } from "@keelson/db";
import { afterEach, describe, expect, it } from "vitest";
import { type Channel, channelsOf, inProcessChannels, NOTIFY_PAYLOAD_LIMIT } from "../src/replicas/channels.ts";
import { TEST_DIALECT } from "./helpers.ts";
import { storesOnOneDatabase, until } from "./replica-fixtures.ts";

/**
 * The channels replicas wake each other on (replicas/channels.ts), between two stores of one
 * database as two replicas have: on PostgreSQL each its own LISTEN connection and pool; on
 * SQLite one process's in-process channels.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function twoEnds() {
  const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
  const shared = inProcessChannels();
  const of = (s: Store) => (TEST_DIALECT === "sqlite" ? shared : channelsOf(s));
  return { sa, a: of(sa), b: of(sb) };
}

describe("notifications between replicas", () => {
  it("reach the other replica each as sent, in order across channels; those of one turn are one statement", async () => {
    const { sa, a, b } = await twoEnds();
    const got: [Channel, string][] = [];
    for (const channel of ["commands", "commandResults"] as const) {
      const unlisten = await b.listen(channel, (payload) => got.push([channel, payload]));
      cleanups.push(unlisten);
    }
    // A rollout batch's commands to hosts linked elsewhere, and answers, within one turn.
    const sent: [Channel, string][] = Array.from({ length: 120 }, (_, i) =>
      i % 3 === 0 ? ["commandResults", `cmd-${i}`] : ["commands", `host-${i} cmd-${i}`],
    );
    const before = sa.statements();
    await Promise.all(sent.map(([channel, payload]) => a.notify(channel, payload)));
    // On PostgreSQL one statement (one transaction, one wake-up of each listener), not 120.
    // SQLite's channels are in-process: no statement at all.
    expect(sa.statements() - before).toBe(TEST_DIALECT === "postgres" ? 1 : 0);
    await until("every notification arrives", () => got.length >= sent.length);
    expect(got).toEqual(sent);
  });

  it("refuse a payload over NOTIFY's limit before sending it; the others of its turn still go", async () => {
    const { a, b } = await twoEnds();
    const got: string[] = [];
    cleanups.push(await b.listen("commands", (payload) => got.push(payload)));
    const over = "x".repeat(NOTIFY_PAYLOAD_LIMIT + 1);
    const results = await Promise.allSettled([a.notify("commands", "h1 c1"), a.notify("commands", over)]);
    expect(results[0]?.status).toBe("fulfilled");
    expect(results[1]).toMatchObject({
      status: "rejected",
      reason: { message: expect.stringMatching(/at most 7999/) },
    });
    await a.notify("commands", "h2 c2");
    await until("both small ones arrive", () => got.length >= 2);
    expect(got).toEqual(["h1 c1", "h2 c2"]);
  });
});
