import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../../test/e2e/support/tcp-proxy.ts";
import { startBadIdProxy } from "../../../test/support/bad-id-proxy.ts";
import {
  createCluster,
  finishedOn,
  followAsPage,
  newestEventId,
  storedEventsAfter,
} from "../../control-plane/test/event-fixtures.ts";
import { createTestApp, type TestApp } from "../../control-plane/test/helpers.ts";
import { waitFor } from "../../control-plane/test/membership-harness.ts";

/**
 * The console's events stream (src/events.ts) under Node, against real control planes on
 * loopback, through a TCP proxy that stands for the network: after the connection is cut, the
 * stream reconnects by itself with Last-Event-ID and gets every stored event once, in order
 * (after its replica stopped, on the other one: control-plane/test/events-resume.test.ts, both
 * stores); a Last-Event-ID the server refuses, and a stream that stays down, end it
 * with the reason (no reconnecting without end). Whatever the page shows is made of these events.
 */

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function proxyTo(t: TestApp): Promise<TcpProxy> {
  const proxy = await startTcpProxy(address(t));
  closers.push(() => proxy.close());
  return proxy;
}

const address = (t: TestApp) => ({ host: "127.0.0.1", port: (t.app.server.address() as AddressInfo).port });

function follow(t: TestApp, base: string, giveUpMs?: number) {
  const following = followAsPage(t, base, giveUpMs);
  closers.push(async () => following.stop());
  return following;
}

async function listeningApp(options: Parameters<typeof createTestApp>[0] = {}): Promise<TestApp> {
  const t = await createTestApp({ runOperations: true, ...options });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  return t;
}

describe("the console's events stream", () => {
  it("after the connection is cut, resumes with Last-Event-ID: every event once, in order, the gap's too", async () => {
    const t = await listeningApp();
    const proxy = await proxyTo(t);
    const opened = await newestEventId(t);
    const { got, seen } = follow(t, proxy.url);
    await waitFor("the stream open", () => t.app.keelson.projectEvents.size === 1);
    await finishedOn(got, await createCluster(t, "before-cut"));

    proxy.refuse(true);
    expect(proxy.cut()).toBe(1);
    // Two operations while the stream is down, then the network comes back.
    await createCluster(t, "in-gap-1");
    const last = await createCluster(t, "in-gap-2");
    await t.app.keelson.runner.idle();
    proxy.refuse(false);
    await finishedOn(got, last);

    const stored = await storedEventsAfter(t, opened);
    expect(got).toEqual(stored);
    expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    expect(seen.reloads).toBe(0);
    expect(seen.gaveUp).toBeUndefined();
    expect(proxy.stats().forwarded).toBeGreaterThanOrEqual(2);
  });

  it("a Last-Event-ID the server refuses (400) ends it with the server's message after one try", async () => {
    const t = await listeningApp();
    const proxy = await startBadIdProxy(`http://127.0.0.1:${address(t).port}`, "not-an-id");
    closers.push(() => proxy.close());
    const { seen } = follow(t, proxy.url);
    await waitFor("the stream given up", () => seen.gaveUp, 10_000);
    expect(seen.gaveUp?.message).toBe(
      'the events stream was refused: HTTP 400 invalid_field: Last-Event-ID must be the id of an event of this stream (a decimal integer), got "not-an-id" (field Last-Event-ID)',
    );
    // Still nothing more after a while: it does not reconnect.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(proxy.resumedWith()).toEqual([undefined, "not-an-id"]);
  });

  it("a stream that stays down gives up at the deadline, 0.5 s doubling apart, and says why", async () => {
    const t = await listeningApp();
    const proxy = await proxyTo(t);
    const { seen } = follow(t, proxy.url, 2_000);
    await waitFor("the stream open", () => t.app.keelson.projectEvents.size === 1);
    proxy.refuse(true);
    const downAt = Date.now();
    proxy.cut();
    await waitFor("the stream given up", () => seen.gaveUp, 10_000);
    const took = Date.now() - downAt;
    expect(seen.gaveUp?.message).toMatch(/^the events stream stayed down for [\d.]+s \(3 attempts to reconnect\): /);
    // Attempts at about 0.5 s, 1.5 s and 2 s (the last at the deadline): three refused, no more.
    expect(proxy.stats().refused).toBe(3);
    expect(took).toBeGreaterThanOrEqual(1_900);
    expect(took).toBeLessThan(4_000);
  });
});
