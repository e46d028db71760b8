import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { startTcpProxy, type TcpProxy } from "../../../test/e2e/support/tcp-proxy.ts";
import { type BadIdProxy, startBadIdProxy } from "../../../test/support/bad-id-proxy.ts";
import { newestEventId, storedEventsAfter } from "../../control-plane/test/event-fixtures.ts";
import { ADMIN_TOKEN } from "../../control-plane/test/helpers.ts";
import type { Fleet } from "../../control-plane/test/membership-harness.ts";
import { waitFor } from "../../control-plane/test/membership-harness.ts";
import { type FleetAllocator, readyCluster } from "../../control-plane/test/rollout-harness.ts";
import { Api } from "../src/api.ts";
import { openEvents, type StreamEvent } from "../src/events.ts";
import { type Operation, OperationProgress } from "../src/progress.ts";
import type { Cli, Session } from "../src/session.ts";
import { useCliFleet } from "./cli-fleet.ts";
import { keelson } from "./run-cli.ts";

/**
 * Following an operation across drops of its events stream: the connection cut (a TCP proxy
 * between the CLI and a real control plane resets every connection and refuses new ones for a
 * while) mid-restart. The follower reconnects by itself with Last-Event-ID and handles every
 * stored event exactly once, in order; a stream that stays down past --reconnect-timeout-ms,
 * and a server that refuses the Last-Event-ID (400), end it with a message instead of a loop.
 */
vi.setConfig({ testTimeout: 180_000 });

let f: Fleet;
let pool: FleetAllocator;
let env: Record<string, string>;
useCliFleet(16, { namePrefix: "clr", phaseTimeMs: 250 }, (fleet) => {
  ({ f, pool, env } = fleet);
});

const proxies: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
});

async function tcpProxy(): Promise<TcpProxy> {
  const url = new URL(f.base);
  const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
  proxies.push(proxy);
  return proxy;
}

async function badIdProxy(): Promise<BadIdProxy> {
  const proxy = await startBadIdProxy(f.base, "not-an-id");
  proxies.push(proxy);
  return proxy;
}

const restart = (clusterId: string) =>
  f.t.request({ method: "POST", url: `/v3/${f.t.projectId}/clusters/${clusterId}/restart?batchPercent=1` });

/** The one operation of `clusterId` that is not in `known`. */
async function newOperation(clusterId: string, known: Set<string>): Promise<Operation> {
  const res = await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/operations?target=${clusterId}` });
  return (res.json() as unknown as Operation[]).find((o) => !known.has(o.uuid)) as Operation;
}

/** A ready cluster of one master and `workers` workers, idle, and a proxy to reach the server through. */
async function clusterBehindProxy(name: string, workers: number) {
  const [master] = pool.take(1);
  const nodes = pool.take(workers);
  const clusterId = await readyCluster(f, name, [master as never], nodes);
  await f.idle();
  return { master, workers: nodes, clusterId, proxy: await tcpProxy() };
}

describe("the CLI's events stream after a drop", () => {
  it("reconnects with Last-Event-ID: every stored event handled once, in order, also those of the gap", async () => {
    const { master, workers, clusterId, proxy } = await clusterBehindProxy("clr-once", 3);
    const notes: string[] = [];
    const cli = { settings: { reconnectTimeoutMs: 30_000 }, out: { note: (t: string) => notes.push(t) } };
    const s: Session = {
      api: new Api({ url: proxy.url, token: ADMIN_TOKEN, timeoutMs: 10_000 }),
      projectId: f.t.projectId,
      projectName: undefined,
      context: undefined,
    };
    const opened = await newestEventId(f.t);
    const stream = await openEvents(cli as unknown as Cli, s);
    const got: StreamEvent[] = [];
    const following = stream.events((e) => got.push(e));
    try {
      expect((await restart(clusterId)).statusCode).toBe(200);
      // Cut once the first worker rolls; stay down while the restart goes on, then let it back.
      await waitFor("a worker converging", () =>
        got.find((e) => e.name === "node.report" && e.data.status === "converging" && e.data.hostId !== master?.hostId),
      );
      proxy.refuse(true);
      expect(proxy.cut()).toBeGreaterThan(0);
      const cutAt = Number(got.at(-1)?.id);
      await waitFor("events stored while the stream is down", async () =>
        (await newestEventId(f.t)) > cutAt + 3 ? 1 : 0,
      );
      proxy.refuse(false);
      await waitFor(
        "the restart's end on the stream",
        () => got.find((e) => e.name === "operation.finished" && e.data.targetId === clusterId),
        60_000,
      );
      expect(notes.some((n) => n.startsWith("events stream dropped"))).toBe(true);
      const resumedAfter = Number(
        /^events stream resumed after event (\d+)$/.exec(
          notes.find((n) => n.startsWith("events stream resumed")) ?? "",
        )?.[1],
      );
      expect(resumedAfter).toBeGreaterThanOrEqual(cutAt);
      const stored = await storedEventsAfter(f.t, opened);
      const last = Number(got.at(-1)?.id);
      expect(got.map((e) => e.id)).toEqual(stored.filter((e) => Number(e.id) <= last).map((e) => e.id));
      expect(got).toEqual(stored.slice(0, got.length));
      expect(workers.map((a) => a.restarts)).toEqual([1, 1, 1]);
    } finally {
      stream.close();
      await following;
      await s.api.close();
    }
  });

  it("keelson restart follows to the end across two cuts; its progress lines are the stored events' own, once each", async () => {
    const { master, workers, clusterId, proxy } = await clusterBehindProxy("clr-cli", 4);
    const before = new Set(
      (
        (
          await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/operations?target=${clusterId}` })
        ).json() as unknown as Operation[]
      ).map((o) => o.uuid),
    );
    const opened = await newestEventId(f.t);
    const bin = join(import.meta.dirname, "..", "bin", "keelson.mjs");
    const child = spawn(process.execPath, [bin, "restart", "clr-cli", "--batch-percent", "1"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env, KEELSON_URL: proxy.url },
    });
    let stderr = "";
    let stdout = "";
    let cuts = 0;
    const cutFor = (ms: number) => {
      cuts++;
      proxy.refuse(true);
      proxy.cut();
      setTimeout(() => proxy.refuse(false), ms);
    };
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
      // A cut as the first worker rolls, and another as the third does.
      if (cuts === 0 && stderr.includes(`${workers[0]?.hostname} (worker): rolling`)) cutFor(1_200);
      if (cuts === 1 && stderr.includes(`${workers[2]?.hostname} (worker): rolling`)) cutFor(700);
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, stderr).toBe(0);
    expect(cuts).toBe(2);
    expect(stdout).toMatch(/succeeded: cluster\.restart/);
    expect(stderr.match(/^events stream resumed after event \d+$/gm)?.length ?? 0).toBeGreaterThanOrEqual(2);

    // The lines the CLI printed are those the stored events make, in order, none twice.
    const op = await newOperation(clusterId, before);
    const nodes = (await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/nodes` })).json() as unknown as {
      uuid: string;
      name: string;
      isMaster: number;
    }[];
    const progress = new OperationProgress(
      op,
      new Map(nodes.map((n) => [n.uuid, { name: n.name, isMaster: n.isMaster === 1 }])),
    );
    const stored = await storedEventsAfter(f.t, opened);
    const end = stored.findIndex((e) => e.name === "operation.finished" && e.data.operationId === op.uuid);
    expect(end).toBeGreaterThan(0);
    const lines = stored.map((e) => progress.apply(e, 0));
    const printed = stderr
      .split("\n")
      .map((l) => /^ *\d[\dhms.]*s {2}(.+)$/.exec(l)?.[1])
      .filter((l): l is string => l !== undefined);
    // Every line up to the operation's end, and perhaps a few after it (before the CLI read the end back).
    const upToEnd = lines.slice(0, end + 1).flat();
    expect(printed.slice(0, upToEnd.length)).toEqual(upToEnd);
    expect(printed).toEqual(lines.flat().slice(0, printed.length));
    expect(printed.filter((l) => l.includes("(worker): done"))).toHaveLength(4);
    expect([master, ...workers].map((a) => a?.restarts)).toEqual([1, 1, 1, 1, 1]);
  });

  it("a stream that stays down gives up after --reconnect-timeout-ms, a bounded number of attempts, exit 3", async () => {
    const { proxy } = await clusterBehindProxy("clr-down", 3);
    const bin = join(import.meta.dirname, "..", "bin", "keelson.mjs");
    const child = spawn(process.execPath, [bin, "restart", "clr-down", "--batch-percent", "1"], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...env,
        KEELSON_URL: proxy.url,
        KEELSON_RECONNECT_TIMEOUT_MS: "3000",
      },
    });
    let stderr = "";
    let downAt = 0;
    child.stderr.on("data", (d) => {
      stderr += d;
      if (!downAt && stderr.includes("(master): rolling")) {
        downAt = Date.now();
        proxy.refuse(true);
        proxy.cut();
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    const took = Date.now() - downAt;
    expect(code, stderr).toBe(3);
    expect(stderr).toMatch(
      /error: the events stream stayed down for [\d.]+s \(\d+ attempts to reconnect\): cannot reach the control plane at http:\/\/127\.0\.0\.1:\d+/,
    );
    // 0.5 s, 1 s and 2 s apart: three attempts within the 3 s, then no more.
    expect(stderr.match(/^events stream dropped/gm)?.length).toBe(3);
    expect(took).toBeGreaterThan(3_000 - 500);
    expect(took).toBeLessThan(3_000 + 5_000);
    // Polls every 2 s go through the proxy too: a handful of refusals, not a loop.
    expect(proxy.stats().refused).toBeLessThanOrEqual(8);
    await f.idle();
  });

  it("a Last-Event-ID the server refuses (400) ends the follower with the server's message, not a loop", async () => {
    await clusterBehindProxy("clr-bad", 2);
    const proxy = await badIdProxy();
    const res = await keelson(["restart", "clr-bad", "--batch-percent", "1"], {
      env: { ...env, KEELSON_URL: proxy.url },
    });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).toContain(
      'error: the events stream was refused: 400 invalid_field: Last-Event-ID must be the id of an event of this stream (a decimal integer), got "not-an-id" (field Last-Event-ID)',
    );
    // The first stream, and one resume that was refused: no other attempt.
    expect(proxy.resumedWith()).toEqual([undefined, "not-an-id"]);
    await f.idle();
  });
});
