import { createTestStore, firstRow, operations, type StorageFull } from "@keelson/db";
import { eq, sql } from "drizzle-orm";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createProject } from "../src/domain/projects/projects.ts";
import { OperationRunner } from "../src/runner/runner.ts";
import { recordOperation } from "../src/runner/store.ts";

describe("OperationRunner", () => {
  it("fails an operation whose kind cannot list its steps, and still runs the next one on that target", async () => {
    const store = createTestStore();
    const db = store.db;
    try {
      const projectId = (await createProject(db, "p")).id;
      const runner = new OperationRunner(db, pino({ level: "silent" }));
      let ran = false;
      runner.register({
        kind: "broken",
        steps: () => {
          throw new Error("params of an older version");
        },
      });
      runner.register({
        kind: "fine",
        steps: () => [
          {
            name: "only",
            run: () => {
              ran = true;
            },
          },
        ],
      });
      await runner.start();
      const record = (kind: string) =>
        recordOperation(db, { projectId, kind, targetType: "cluster", targetId: "target-1" });
      const broken = await record("broken");
      // Operations on one target are claimed in the order (created_at, id): recorded in the same
      // millisecond, a random id could put "fine" first, and "broken" would wait for the next
      // pickup. A few milliseconds apart, the order is the one recorded.
      await new Promise((resolve) => setTimeout(resolve, 5));
      const fine = await record("fine");
      runner.enqueue(broken);
      runner.enqueue(fine);
      await runner.idle();
      const state = async (id: string) => firstRow(await db.select().from(operations).where(eq(operations.id, id)));
      expect(await state(broken.id)).toMatchObject({ state: "failed", error: "params of an older version" });
      expect((await state(fine.id))?.state).toBe("succeeded");
      expect(ran).toBe(true);
      await runner.stop();
    } finally {
      await store.close();
    }
  });

  it("resumes at the step of the saved name when a newer release added a step before it", async () => {
    const store = createTestStore();
    const db = store.db;
    try {
      const projectId = (await createProject(db, "p")).id;
      const runner = new OperationRunner(db, pino({ level: "silent" }));
      const ran: string[] = [];
      const seen: Record<string, unknown>[] = [];
      const step = (name: string) => ({
        name,
        run: (ctx: { progress: Record<string, unknown> }) => {
          ran.push(name);
          seen.push({ ...ctx.progress });
        },
      });
      // The release that recorded the operation had steps [a, b]; this one has [new, a, b].
      runner.register({ kind: "grown", steps: () => [step("new"), step("a"), step("b")] });
      const op = await recordOperation(db, { projectId, kind: "grown", targetType: "cluster", targetId: "target-2" });
      await db
        .update(operations)
        .set({ cursor: { step: 1, stepName: "b", progress: { done: ["n1"] } } })
        .where(eq(operations.id, op.id));
      await runner.start();
      await runner.idle();
      expect(ran).toEqual(["b"]);
      expect(seen).toEqual([{ done: ["n1"] }]);
      // A cursor without a name (recorded before names were kept) resumes by its index.
      const old = await recordOperation(db, { projectId, kind: "grown", targetType: "cluster", targetId: "target-3" });
      await db
        .update(operations)
        .set({ cursor: { step: 2, progress: {} } })
        .where(eq(operations.id, old.id));
      runner.enqueue(old);
      await runner.idle();
      expect(ran).toEqual(["b", "b"]);
      const state = firstRow(await db.select().from(operations).where(eq(operations.id, op.id)));
      expect(state?.state).toBe("succeeded");
      await runner.stop();
    } finally {
      await store.close();
    }
  });

  it("keeps an operation's outcome when an event listener throws", async () => {
    const store = createTestStore();
    const db = store.db;
    try {
      const projectId = (await createProject(db, "p")).id;
      const runner = new OperationRunner(db, pino({ level: "silent" }));
      runner.register({ kind: "fine", steps: () => [{ name: "only", run: () => undefined }] });
      runner.events.on("event", () => {
        throw new Error("listener bug");
      });
      await runner.start();
      const op = await recordOperation(db, { projectId, kind: "fine", targetType: "cluster", targetId: "t" });
      runner.enqueue(op);
      await runner.idle();
      const row = firstRow(await db.select().from(operations).where(eq(operations.id, op.id)));
      expect(row).toMatchObject({ state: "succeeded", error: null });
      await runner.stop();
    } finally {
      await store.close();
    }
  });

  it("starts an operation a request recorded a moment later, counted by idle() meanwhile; a stop ends the wait", async () => {
    const store = createTestStore();
    const db = store.db;
    try {
      const projectId = (await createProject(db, "p")).id;
      const runner = new OperationRunner(db, pino({ level: "silent" }));
      const ran: number[] = [];
      runner.register({ kind: "fine", steps: () => [{ name: "only", run: () => void ran.push(performance.now()) }] });
      await runner.start();
      const record = () => recordOperation(db, { projectId, kind: "fine", targetType: "cluster", targetId: "t" });
      const op = await record();
      const enqueuedAt = performance.now();
      runner.enqueue(op);
      await runner.idle();
      // The request's answer and its client's next reads go first (START_DELAY_MS, 20 ms: a timer
      // fires at most a millisecond early, so this holds on any machine, however loaded).
      expect((ran[0] as number) - enqueuedAt).toBeGreaterThanOrEqual(15);
      const state = async (id: string) => firstRow(await db.select().from(operations).where(eq(operations.id, id)));
      expect((await state(op.id))?.state).toBe("succeeded");

      // Stopped while one waits: it is left pending for the next start, and the stop does not wait it out.
      const waiting = await record();
      runner.enqueue(waiting);
      await runner.stop();
      expect(ran).toHaveLength(1);
      expect((await state(waiting.id))?.state).toBe("pending");
    } finally {
      await store.close();
    }
  });

  it("waits out a full store (a real SQLITE_FULL saving progress) and resumes from its cursor, not failed", async () => {
    const store = createTestStore();
    const db = store.db;
    try {
      const projectId = (await createProject(db, "p")).id;
      const full: StorageFull[] = [];
      let room!: () => void;
      const noticed = new Promise<void>((resolve) => {
        room = resolve;
      });
      const runner = new OperationRunner(db, pino({ level: "silent" }), (f) => {
        full.push(f);
        room();
      });
      const ran: string[] = [];
      runner.register({
        kind: "big",
        steps: () => [
          { name: "first", run: () => void ran.push("first") },
          {
            name: "second",
            run: async (ctx) => {
              ran.push("second");
              // ~200 KiB of progress: more than the pages the store may still take.
              await ctx.saveProgress({ blob: "x".repeat(200_000) });
            },
          },
        ],
      });
      await runner.start();
      const op = await recordOperation(db, { projectId, kind: "big", targetType: "cluster", targetId: "t" });
      const [pages] = await db.get<[number]>(sql`pragma page_count`);
      await db.run(sql.raw(`pragma max_page_count = ${pages + 4}`));
      runner.enqueue(op);
      await noticed;
      expect(full[0]).toMatchObject({ where: "data-dir" });
      expect(firstRow(await db.select().from(operations).where(eq(operations.id, op.id)))?.state).toBe("running");
      await db.run(sql.raw("pragma max_page_count = 1073741823"));
      await runner.idle();
      const row = firstRow(await db.select().from(operations).where(eq(operations.id, op.id)));
      expect(row).toMatchObject({ state: "succeeded", error: null });
      // The first step was done once; the second ran again from the saved cursor.
      expect(ran.filter((s) => s === "first")).toHaveLength(1);
      expect(ran.filter((s) => s === "second").length).toBeGreaterThanOrEqual(2);
      await runner.stop();
    } finally {
      await store.close();
    }
  });
});
