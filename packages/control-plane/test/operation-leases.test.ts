import { setTimeout as sleep } from "node:timers/promises";
import { firstRow, operations, type Store } from "@keelson/db";
import { eq } from "drizzle-orm";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createProject } from "../src/domain/projects/projects.ts";
import { channelsOf, inProcessChannels } from "../src/replicas/channels.ts";
import { claimableOperations, claimOperation, LeaseLost, type LeaseOptions } from "../src/runner/leases.ts";
import { OperationRunner } from "../src/runner/runner.ts";
import { recordOperation } from "../src/runner/store.ts";
import { OperationInterrupted, type OperationKind, type StepContext } from "../src/runner/types.ts";
import { TEST_DIALECT } from "./helpers.ts";
import { storesOnOneDatabase } from "./replica-fixtures.ts";

/**
 * Operations claimed by several replicas on one database (issue 17): each runner here has a
 * store of its own on the same database (a second connection to the SQLite file, or a second
 * pool on PostgreSQL), as two control-plane processes would.
 */

const silent = pino({ level: "silent" });
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function runnerOn(store: Store, replicaId: string, lease: Partial<LeaseOptions> = {}): OperationRunner {
  const runner = new OperationRunner(store.db, silent, undefined, {
    replicaId,
    leaseMs: 5_000,
    renewMs: 100,
    deadlineMs: 2_000,
    ...lease,
  });
  cleanups.push(() => runner.stop(2_000));
  return runner;
}

async function row(store: Store, id: string) {
  return firstRow(await store.db.select().from(operations).where(eq(operations.id, id)));
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** replica-a's lease runs out (it was paused, say) and replica-b claims the operation. */
async function takeOver(sb: Store, id: string) {
  await sb.db.update(operations).set({ leaseUntil: "2000-01-01T00:00:00.000Z" }).where(eq(operations.id, id));
  return await claimOperation(sb.db, id, "replica-b", 60_000, ["held"]);
}

/** Resolves with the step context once the step of a `held` operation runs; it then waits for its signal. */
function heldKind(onStep: (ctx: StepContext, replica: string) => Promise<void>, replica: string): OperationKind {
  return {
    kind: "held",
    steps: () => [
      { name: "wait", run: (ctx) => onStep(ctx, replica) },
      { name: "after", run: () => undefined },
    ],
  };
}

/** A step that waits until its signal aborts, then gives up as steps do. */
async function untilAborted(ctx: StepContext): Promise<void> {
  if (!ctx.signal.aborted) await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
  throw new OperationInterrupted();
}

describe("operations claimed with leases and fences", () => {
  it("two replicas racing for 100 pending operations run each exactly once, one at a time per target, in order", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const runs: { id: string; target: string; replica: string; start: number; end: number }[] = [];
    const ids: string[] = [];
    const base = Date.parse("2026-01-01T00:00:00.000Z");
    for (let i = 0; i < 100; i++) {
      const op = await recordOperation(sa.db, {
        projectId,
        kind: "count",
        targetType: "cluster",
        targetId: `t${i % 25}`,
      });
      // Distinct creation times: the order the claims must keep on each target.
      await sa.db
        .update(operations)
        .set({ createdAt: new Date(base + i).toISOString() })
        .where(eq(operations.id, op.id));
      ids.push(op.id);
    }
    const runners = [runnerOn(sa, "replica-a"), runnerOn(sb, "replica-b")];
    for (const [r, name] of [
      [runners[0], "replica-a"],
      [runners[1], "replica-b"],
    ] as const) {
      r?.register({
        kind: "count",
        steps: (op) => [
          {
            name: "only",
            run: async () => {
              const start = performance.now();
              await sleep(3);
              runs.push({ id: op.id, target: op.targetId, replica: name, start, end: performance.now() });
            },
          },
        ],
      });
    }
    await Promise.all(runners.map((r) => r.start()));
    await until("every operation finished", async () =>
      (await sa.db.select({ state: operations.state }).from(operations)).every((o) => o.state === "succeeded"),
    );
    expect(runs).toHaveLength(100);
    expect(new Set(runs.map((r) => r.id)).size).toBe(100);
    const rows = await sa.db.select().from(operations);
    for (const r of runs) expect(rows.find((o) => o.id === r.id)?.owner).toBe(r.replica);
    for (let t = 0; t < 25; t++) {
      const onTarget = runs.filter((r) => r.target === `t${t}`);
      expect(onTarget.map((r) => r.id)).toEqual(ids.filter((_, i) => i % 25 === t));
      for (let i = 1; i < onTarget.length; i++) {
        expect(onTarget[i]?.start).toBeGreaterThanOrEqual(onTarget[i - 1]?.end as number);
      }
    }
    const by = (replica: string) => runs.filter((r) => r.replica === replica).length;
    process.stdout.write(
      `[leases] ${TEST_DIALECT}: ran by replica-a ${by("replica-a")}, by replica-b ${by("replica-b")}\n`,
    );
  });

  it("refuses every write of a former owner once another claim raised the fence, and stops its step work", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const a = runnerOn(sa, "replica-a", { renewMs: 60_000, deadlineMs: 120_000, leaseMs: 300_000 });
    let ctxA: StepContext | undefined;
    let go!: () => void;
    const gate = new Promise<void>((r) => {
      go = r;
    });
    const stepsRun: string[] = [];
    a.register({
      kind: "held",
      steps: () => [
        {
          name: "wait",
          run: async (ctx) => {
            ctxA = ctx;
            await gate;
            // Progress saved by a former owner changes nothing either.
            await ctx.saveProgress({ from: "replica-a" });
          },
        },
        { name: "after", run: () => void stepsRun.push("after") },
      ],
    });
    await a.start();
    const op = await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t" });
    a.enqueue(op);
    await until("replica-a runs the step", () => ctxA !== undefined);
    expect(await row(sa, op.id)).toMatchObject({ owner: "replica-a", fence: 1, state: "running" });

    expect(await takeOver(sb, op.id)).toMatchObject({ owner: "replica-b", fence: 2 });
    const before = await row(sb, op.id);

    go();
    await a.idle();
    expect(ctxA?.signal.aborted).toBe(true);
    expect(ctxA?.signal.reason).toBeInstanceOf(LeaseLost);
    expect(stepsRun).toEqual([]);
    const after = await row(sb, op.id);
    expect(after).toEqual(before);
    expect(after).toMatchObject({ owner: "replica-b", fence: 2, state: "running", cursor: { step: 0, progress: {} } });
  });

  it("a renewal that finds its lease taken stops the step at once", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const a = runnerOn(sa, "replica-a", { renewMs: 60_000, deadlineMs: 120_000, leaseMs: 300_000 });
    let ctxA: StepContext | undefined;
    a.register(
      heldKind(async (ctx) => {
        ctxA = ctx;
        await untilAborted(ctx);
      }, "replica-a"),
    );
    await a.start();
    const op = await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t" });
    a.enqueue(op);
    await until("replica-a runs the step", () => ctxA !== undefined);
    expect(await takeOver(sb, op.id)).toBeDefined();
    expect(ctxA?.signal.aborted).toBe(false);
    await a.renew();
    expect(ctxA?.signal.reason).toBeInstanceOf(LeaseLost);
    await a.idle();
    expect(a.holding).toBe(0);
    expect(await row(sa, op.id)).toMatchObject({ owner: "replica-b", fence: 2, state: "running" });
  });

  it("a replica cut off from renewing fences itself before its lease runs out, then takes the operation up again", async () => {
    const [store] = (await storesOnOneDatabase(1, cleanups)) as [Store];
    const projectId = (await createProject(store.db, "p")).id;
    let cut = false;
    const a = runnerOn(store, "replica-a", {
      leaseMs: 3_000,
      renewMs: 100,
      deadlineMs: 600,
      heartbeat: async () => {
        if (cut) throw new Error("cut off from the database");
      },
    });
    let runs = 0;
    let ctxA: StepContext | undefined;
    a.register(
      heldKind(async (ctx) => {
        runs++;
        if (runs > 1) return;
        ctxA = ctx;
        await untilAborted(ctx);
      }, "replica-a"),
    );
    await a.start();
    const op = await recordOperation(store.db, { projectId, kind: "held", targetType: "cluster", targetId: "t" });
    a.enqueue(op);
    await until("the step runs", () => ctxA !== undefined);
    await sleep(250); // at least one renewal went through
    const cutAt = Date.now();
    cut = true;
    await until("the step is stopped", () => ctxA?.signal.aborted === true, 5_000);
    const fencedAt = Date.now();
    expect(a.fenced).toBe(true);
    const leaseUntil = Date.parse((await row(store, op.id))?.leaseUntil as string);
    // Stopped before the lease it last renewed runs out: nobody else may have claimed it yet.
    expect(fencedAt).toBeLessThan(leaseUntil);
    expect(fencedAt - cutAt).toBeLessThan(600 + 200);
    cut = false;
    await until("the operation succeeds", async () => (await row(store, op.id))?.state === "succeeded");
    expect(a.fenced).toBe(false);
    expect(runs).toBe(2);
    expect(await row(store, op.id)).toMatchObject({ owner: "replica-a", attempts: 2 });
  });

  /**
   * Replica A runs a step until it is stopped gracefully, then B (started while A holds it)
   * takes the operation over: the time from A's stop to B's step, and the row at the end.
   */
  async function gracefulHandover(leases: { a: Partial<LeaseOptions>; b: Partial<LeaseOptions> }, wake: boolean) {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    // On SQLite the two stores share one file, and one process's channels, as two apps would.
    const shared = inProcessChannels();
    const channels = (s: Store) => (wake ? { channels: TEST_DIALECT === "sqlite" ? shared : channelsOf(s) } : {});
    const projectId = (await createProject(sa.db, "p")).id;
    const a = runnerOn(sa, "replica-a", { ...leases.a, ...channels(sa) });
    const b = runnerOn(sb, "replica-b", { ...leases.b, ...channels(sb) });
    let heldByA = false;
    let tookOver = 0;
    const onStep = async (ctx: StepContext, replica: string) => {
      if (replica === "replica-b") {
        tookOver = Date.now();
        return;
      }
      heldByA = true;
      await untilAborted(ctx);
    };
    a.register(heldKind(onStep, "replica-a"));
    b.register(heldKind(onStep, "replica-b"));
    await a.start();
    const op = await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t" });
    a.enqueue(op);
    await until("replica-a runs the step", () => heldByA);
    // B's first renewal runs as it starts (A still holds the operation); the next is a renewal away.
    await b.start();
    const stopping = Date.now();
    await a.stop();
    await until("the operation succeeds", async () => (await row(sb, op.id))?.state === "succeeded", 5_000);
    return { handover: tookOver - stopping, row: await row(sb, op.id) };
  }

  it("a graceful stop releases the leases: another replica takes the operation over within 1 s", async () => {
    const { handover, row: after } = await gracefulHandover(
      {
        a: { leaseMs: 10_000, renewMs: 2_000, deadlineMs: 7_000 },
        b: { leaseMs: 10_000, renewMs: 200, deadlineMs: 7_000 },
      },
      false,
    );
    process.stdout.write(`[leases] ${TEST_DIALECT}: graceful stop to the other replica's step: ${handover} ms\n`);
    expect(handover).toBeLessThan(1_000);
    expect(after).toMatchObject({ owner: "replica-b", fence: 2, attempts: 2 });
  });

  it("a graceful stop announces its release: the other replica claims at once, not at its next renewal", async () => {
    const slow = { leaseMs: 10_000, renewMs: 3_000, deadlineMs: 7_000 };
    const { handover, row: after } = await gracefulHandover({ a: slow, b: slow }, true);
    process.stdout.write(
      `[leases] ${TEST_DIALECT}: graceful stop to the other replica's step, 3 s renewals: ${handover} ms\n`,
    );
    expect(handover).toBeLessThan(1_000);
    expect(after).toMatchObject({ owner: "replica-b", fence: 2, attempts: 2 });
  });

  it("a drain hands over what it holds at once and claims nothing more, while it goes on renewing", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const a = runnerOn(sa, "replica-a", { leaseMs: 10_000, renewMs: 100, deadlineMs: 7_000 });
    const b = runnerOn(sb, "replica-b", { leaseMs: 10_000, renewMs: 200, deadlineMs: 7_000 });
    const ran: string[] = [];
    let heldByA = false;
    const onStep = async (ctx: StepContext, replica: string) => {
      ran.push(`${ctx.op.targetId}@${replica}`);
      if (replica === "replica-a" && ctx.op.targetId === "t1") {
        heldByA = true;
        await untilAborted(ctx);
      }
    };
    a.register(heldKind(onStep, "replica-a"));
    b.register(heldKind(onStep, "replica-b"));
    await a.start();
    const first = await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t1" });
    a.enqueue(first);
    await until("replica-a runs the step", () => heldByA);
    await b.start();
    const draining = Date.now();
    expect(await a.handOver()).toEqual([first.id]);
    expect(a.draining).toBe(true);
    expect(await row(sa, first.id)).toMatchObject({ owner: null, leaseUntil: null, state: "running" });
    await until("replica-b finishes it", async () => (await row(sb, first.id))?.state === "succeeded", 5_000);
    process.stdout.write(`[leases] ${TEST_DIALECT}: drain to the other replica's end: ${Date.now() - draining} ms\n`);
    // Recorded and enqueued on the drained replica: left pending, run by the other.
    const second = await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t2" });
    a.enqueue(second);
    await until("replica-b runs the new one", async () => (await row(sb, second.id))?.state === "succeeded", 5_000);
    expect(ran).toEqual(["t1@replica-a", "t1@replica-b", "t2@replica-b"]);
    expect(await row(sb, first.id)).toMatchObject({ owner: "replica-b", attempts: 2 });
    expect(await row(sb, second.id)).toMatchObject({ owner: "replica-b", attempts: 1 });
    // Still renewing: not fenced after several renewals, and a second drain is a no-op.
    await sleep(400);
    expect(a.fenced).toBe(false);
    expect(await a.handOver()).toEqual([]);
  });

  it("leaves an operation of a kind it does not know pending for a replica that knows it", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const older = runnerOn(sa, "replica-old");
    const ran: string[] = [];
    const kind = (name: string, replica: string): OperationKind => ({
      kind: name,
      steps: () => [{ name: "only", run: () => void ran.push(`${name} by ${replica}`) }],
    });
    older.register(kind("known", "replica-old"));
    const newer = await recordOperation(sa.db, { projectId, kind: "newer", targetType: "cluster", targetId: "t1" });
    const known = await recordOperation(sa.db, { projectId, kind: "known", targetType: "cluster", targetId: "t2" });
    await older.start();
    older.enqueue(newer);
    older.enqueue(known);
    await until("the known kind succeeds", async () => (await row(sa, known.id))?.state === "succeeded");
    await older.renew();
    await older.idle();
    expect(await row(sa, newer.id)).toMatchObject({ state: "pending", owner: null, attempts: 0, error: null });

    const upgraded = runnerOn(sb, "replica-new");
    upgraded.register(kind("known", "replica-new"));
    upgraded.register(kind("newer", "replica-new"));
    await upgraded.start();
    await until("the newer kind succeeds", async () => (await row(sb, newer.id))?.state === "succeeded");
    expect(ran).toEqual(["known by replica-old", "newer by replica-new"]);
    expect(await row(sb, newer.id)).toMatchObject({ owner: "replica-new", attempts: 1 });
  });

  it("two operations on one target recorded in the same millisecond: only the lower id may be claimed until it ends", async () => {
    const [sa, sb] = (await storesOnOneDatabase(2, cleanups)) as [Store, Store];
    const projectId = (await createProject(sa.db, "p")).id;
    const ops = [];
    for (let i = 0; i < 2; i++) {
      ops.push(await recordOperation(sa.db, { projectId, kind: "held", targetType: "cluster", targetId: "t" }));
    }
    const stamp = "2026-01-01T00:00:00.000Z";
    await sa.db.update(operations).set({ createdAt: stamp });
    const [first, second] = ops.map((o) => o.id).sort() as [string, string];
    expect(await claimableOperations(sb.db, "replica-b", 10, ["held"])).toEqual([
      { id: first, targetId: "t" },
      { id: second, targetId: "t" },
    ]);
    // The later one first, from another replica: refused while the earlier one is unfinished.
    expect(await claimOperation(sb.db, second, "replica-b", 60_000, ["held"])).toBeUndefined();
    expect(await claimOperation(sa.db, first, "replica-a", 60_000, ["held"])).toMatchObject({ owner: "replica-a" });
    expect(await claimOperation(sb.db, second, "replica-b", 60_000, ["held"])).toBeUndefined();
    await sa.db.update(operations).set({ state: "succeeded" }).where(eq(operations.id, first));
    expect(await claimOperation(sb.db, second, "replica-b", 60_000, ["held"])).toMatchObject({ owner: "replica-b" });
  });
});
