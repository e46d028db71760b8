import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startTcpProxy } from "../../../test/e2e/support/tcp-proxy.ts";
import { inProcessChannels } from "../src/replicas/channels.ts";
import { createCluster, finishedOn, followAsPage, newestEventId, storedEventsAfter } from "./event-fixtures.ts";
import { ADMIN_TOKEN, createTestApp, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";
import { SHORT } from "./replica-fixtures.ts";

/**
 * A client of the events stream (the console's, packages/console/src/events.ts, run under Node)
 * following through a load balancer (a TCP proxy) while the replica serving it stops or is
 * drained: the balancer sends it to the other replica of the same database, where it resumes with
 * Last-Event-ID and gets every stored event of the project once, in order. On both stores (on
 * SQLite two apps on one file, as replica-fixtures does; on PostgreSQL two replicas of one
 * database, where the stream on A also shows B's operations live).
 */

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const address = (t: TestApp) => ({ host: "127.0.0.1", port: (t.app.server.address() as AddressInfo).port });

async function replica(
  id: string,
  shared?: { dataDir: string; channels: ReturnType<typeof inProcessChannels> | undefined },
) {
  const channels = shared ? shared.channels : TEST_DIALECT === "sqlite" ? inProcessChannels() : undefined;
  const t = await createTestApp({
    runOperations: true,
    ...(channels ? { channels } : {}),
    ...(shared ? { dataDir: shared.dataDir } : {}),
    settings: { ...SHORT, replicaId: id },
  });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  return { t, channels };
}

/** Replica A, a balancer in front of it, a client following through it, and one operation it saw run on A. */
async function followingOnA() {
  const { t: a, channels } = await replica("cp-a");
  const balancer = await startTcpProxy(address(a));
  closers.push(() => balancer.close());
  const opened = await newestEventId(a);
  const { got, seen, stop } = followAsPage(a, balancer.url);
  closers.push(async () => stop());
  await waitFor("the stream open on A", () => a.app.keelson.eventStreams.size === 1);
  await finishedOn(got, await createCluster(a, "on-a"));
  // B joins once A's operation is done (on SQLite a stream shows its own replica's live events only).
  const { t: b } = await replica("cp-b", { dataDir: a.dataDir, channels });
  return { a, b, balancer, opened, got, seen };
}

describe("a resuming client when its replica stops or drains", () => {
  it(`moves to the other replica when its replica stops, and gets every event once, in order (${TEST_DIALECT})`, async () => {
    const { a, b, balancer, opened, got, seen } = await followingOnA();
    if (TEST_DIALECT === "postgres") await finishedOn(got, await createCluster(b, "through-b-while-on-a"));

    // A stops (its streams end); the balancer sends new connections to B, where work goes on.
    balancer.retarget(address(b));
    await a.close(true);
    const onB = await createCluster(b, "on-b");
    await finishedOn(got, onB);
    expect(b.app.keelson.eventStreams.size).toBe(1);

    expect(got).toEqual(await storedEventsAfter(b, opened));
    expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    expect(seen).toEqual({ reloads: 0, gaveUp: undefined });
  });

  it(`a drained replica ends its streams; the client resumes on the other replica without a gap (${TEST_DIALECT})`, async () => {
    const { a, b, balancer, opened, got, seen } = await followingOnA();
    // The balancer takes A out (its /readyz answers 503 draining) as the drain begins.
    balancer.retarget(address(b));
    const drained = await b.request({ method: "POST", url: "/v1/replicas/cp-a/drain", token: ADMIN_TOKEN });
    expect(drained.statusCode, drained.body).toBe(202);
    await waitFor("A's streams ended", () => a.app.keelson.eventStreams.size === 0);
    const onB = await createCluster(b, "after-drain");
    await waitFor("the client on B", () => b.app.keelson.eventStreams.size === 1, 10_000);
    await finishedOn(got, onB);
    // A is still up (a drain stops nothing but its work): the client is on B only.
    expect(a.app.keelson.eventStreams.size).toBe(0);
    expect(got).toEqual(await storedEventsAfter(b, opened));
    expect(seen).toEqual({ reloads: 0, gaveUp: undefined });
  });
});
