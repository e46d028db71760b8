import { EventEmitter } from "node:events";
import { type Db, databaseUnavailable, firstRow, operations, type StorageFull, storageFull } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import { unfinishedOperations } from "./store.ts";
import {
  type OperationEvent,
  OperationInterrupted,
  type OperationKind,
  type OperationRow,
  type StepContext,
} from "./types.ts";

/** The longest wait between two tries of an operation while the database is away. */
const DATABASE_RETRY_MAX_MS = 5_000;

interface Cursor {
  step: number;
  /**
   * The name of the step at `step`: a newer release that adds a step before it resumes at the
   * step of that name, not at an index that now means another step.
   */
  stepName?: string;
  progress: Record<string, unknown>;
}

/**
 * Executes operations step by step (DESIGN.md "Operations"). Operations on one target run one
 * after another in the order they were recorded; different targets run side by side. The
 * cursor is saved after every step, so after a crash `start()` picks every unfinished
 * operation up where it stopped.
 */
export class OperationRunner {
  readonly events = new EventEmitter<{ event: [OperationEvent] }>();
  private readonly kinds = new Map<string, OperationKind>();
  /** One promise chain per target: the serialisation point. */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly queued = new Set<string>();
  private readonly active = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private started = false;

  constructor(
    private readonly db: Db,
    private readonly log: FastifyBaseLogger,
    /** Told when a write of an operation found the storage full (which the runner waits out). */
    private readonly onStorageFull?: (full: StorageFull) => void,
  ) {
    this.events.setMaxListeners(0);
  }

  register(kind: OperationKind): void {
    this.kinds.set(kind.kind, kind);
  }

  /** Resumes every unfinished operation, then runs new ones as they are enqueued. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    for (const op of await unfinishedOperations(this.db)) this.schedule(op.id, op.targetId);
  }

  get isRunning(): boolean {
    return this.started && !this.abort.signal.aborted;
  }

  /** Call after the transaction that recorded the operation has committed. */
  enqueue(op: Pick<OperationRow, "id" | "targetId">): void {
    if (this.started && !this.abort.signal.aborted) this.schedule(op.id, op.targetId);
  }

  /** Resolves once every operation now queued or running has settled (tests and benchmarks). */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.allSettled([...this.active]);
  }

  /** Stops taking work and waits for running steps to notice the abort and return. */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.abort.abort();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.allSettled([...this.active]), timeout]);
    clearTimeout(timer);
  }

  private schedule(id: string, targetId: string): void {
    if (this.queued.has(id)) return;
    this.queued.add(id);
    const previous = this.chains.get(targetId) ?? Promise.resolve();
    // The chain must never reject: a rejected link would skip every later operation of the
    // target, and the rejection would go unhandled (which stops the process).
    const next = previous
      .then(() => this.execute(id))
      .catch((err) => this.log.error({ operation: id, err }, "running an operation failed"))
      .finally(() => this.queued.delete(id));
    this.chains.set(targetId, next);
    this.active.add(next);
    void next.finally(() => {
      this.active.delete(next);
      if (this.chains.get(targetId) === next) this.chains.delete(targetId);
    });
  }

  /**
   * Runs an operation; while the database is away (PostgreSQL restarting, a failover) or the
   * storage full it is neither failed nor dropped: it waits and runs again from its saved
   * cursor, as after a restart of the control plane, so each node's step is still done once.
   */
  private async execute(id: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.executeOnce(id);
        return;
      } catch (err) {
        const away = databaseUnavailable(err);
        if (!away) throw err;
        const full = storageFull(err);
        if (full) this.onStorageFull?.(full);
        const delayMs = Math.min(DATABASE_RETRY_MAX_MS, 250 * 2 ** attempt);
        this.log.warn(
          { operation: id, reason: away, retryInMs: delayMs },
          "database away; the operation resumes when it is back",
        );
        if (!(await this.sleep(delayMs))) return;
      }
    }
  }

  /** Resolves true after `ms`, false at once when the runner stops. */
  private sleep(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.abort.signal.aborted) return resolve(false);
      const timer = setTimeout(() => {
        this.abort.signal.removeEventListener("abort", stop);
        resolve(true);
      }, ms);
      const stop = () => {
        clearTimeout(timer);
        resolve(false);
      };
      this.abort.signal.addEventListener("abort", stop, { once: true });
    });
  }

  private async executeOnce(id: string): Promise<void> {
    if (this.abort.signal.aborted) return;
    const op = firstRow(await this.db.select().from(operations).where(eq(operations.id, id)));
    if (!op || op.state === "succeeded" || op.state === "failed") return;
    const kind = this.kinds.get(op.kind);
    const cursor: Cursor = { step: 0, progress: {}, ...(op.cursor as Partial<Cursor> | null) };
    const ctx = this.contextFor(op, cursor);
    if (!kind) {
      await this.finish(op, "failed", `no handler for operation kind ${op.kind}`);
      return;
    }
    const startedAt = op.startedAt ?? new Date().toISOString();
    await this.db
      .update(operations)
      .set({ state: "running", attempts: op.attempts + 1, startedAt })
      .where(eq(operations.id, id));
    this.emit(op, "operation.started", "running");
    try {
      // Inside the try: params a kind cannot read fail the operation instead of leaving it running.
      const steps = kind.steps(op);
      const named = cursor.stepName ? steps.findIndex((s) => s.name === cursor.stepName) : -1;
      for (let i = named >= 0 ? named : cursor.step; i < steps.length; i++) {
        const step = steps[i];
        if (!step) break;
        if (this.abort.signal.aborted) throw new OperationInterrupted();
        cursor.step = i;
        cursor.stepName = step.name;
        await step.run(ctx);
        cursor.step = i + 1;
        cursor.stepName = steps[i + 1]?.name;
        cursor.progress = {};
        await this.saveCursor(id, cursor);
        this.emit(op, "operation.step", "running", step.name);
      }
      await this.finish(op, "succeeded", null, startedAt);
    } catch (err) {
      if (err instanceof OperationInterrupted || this.abort.signal.aborted) {
        this.log.info({ operation: id, kind: op.kind }, "operation interrupted; it resumes at next start");
        return;
      }
      // Not the operation's failure: execute() runs it again once the database answers.
      if (databaseUnavailable(err)) throw err;
      const error = err instanceof Error ? err : new Error(String(err));
      this.log.warn({ operation: id, kind: op.kind, err: error }, "operation failed");
      try {
        await kind.onFailed?.(ctx, error);
      } catch (hookError) {
        this.log.error({ operation: id, err: hookError }, "recording an operation failure failed");
      }
      await this.finish(op, "failed", error.message, startedAt);
    }
  }

  private contextFor(op: OperationRow, cursor: Cursor): StepContext {
    return {
      op,
      db: this.db,
      log: this.log.child({ operation: op.id, kind: op.kind }),
      signal: this.abort.signal,
      progress: cursor.progress,
      saveProgress: async (patch) => {
        Object.assign(cursor.progress, patch);
        await this.saveCursor(op.id, cursor);
      },
    };
  }

  private async saveCursor(id: string, cursor: Cursor): Promise<void> {
    await this.db
      .update(operations)
      .set({ cursor: { ...cursor } })
      .where(eq(operations.id, id));
  }

  private async finish(
    op: OperationRow,
    state: "succeeded" | "failed",
    error: string | null,
    startedAt?: string,
  ): Promise<void> {
    const finishedAt = new Date();
    await this.db
      .update(operations)
      .set({ state, error, finishedAt: finishedAt.toISOString() })
      .where(eq(operations.id, op.id));
    const durationMs = startedAt ? finishedAt.getTime() - Date.parse(startedAt) : undefined;
    this.emit(op, "operation.finished", state, undefined, error, durationMs);
  }

  private emit(
    op: OperationRow,
    type: OperationEvent["type"],
    state: OperationEvent["state"],
    step?: string,
    error?: string | null,
    durationMs?: number,
  ): void {
    const event: OperationEvent = {
      type,
      operationId: op.id,
      projectId: op.projectId,
      kind: op.kind,
      targetId: op.targetId,
      state,
      ...(step === undefined ? {} : { step }),
      ...(error === undefined ? {} : { error }),
      ...(durationMs === undefined ? {} : { durationMs }),
    };
    // Listeners run synchronously inside execute(): one that throws must not turn a succeeded
    // operation into a failed one, nor leave one stuck in `running`.
    try {
      this.events.emit("event", event);
    } catch (err) {
      this.log.error({ operation: op.id, type, err }, "an operation event listener failed");
    }
  }
}
