import { EventEmitter } from "node:events";
import { type Db, databaseUnavailable, operations, type StorageFull, storageFull } from "@keelson/db";
import type { StepBatch } from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import { logWriteFailure } from "../storage/log-failure.ts";
import {
  type Claim,
  claimableOperations,
  claimOperation,
  heldBy,
  LeaseLost,
  type LeaseOptions,
  releaseLeases,
  renewLeases,
  SINGLE_PROCESS,
} from "./leases.ts";
import {
  type OperationEvent,
  OperationInterrupted,
  type OperationKind,
  type OperationRow,
  type StepContext,
} from "./types.ts";
import { settleWithin, sleepUnlessAborted } from "./waits.ts";

/** The longest wait between two tries of an operation while the database is away. */
const DATABASE_RETRY_MAX_MS = 5_000;

/**
 * How long an operation a request recorded waits before its first step. The request answers
 * first, and its client's next reads (the record it just changed, the operation) are served
 * before the steps compete with them for the event loop and the database: a cluster record read
 * right after an update took 3.0× a warm read with the steps starting at once, 1.6× with this
 * wait (10 ms and longer alike; 5 ms was too short for the read to be served first). An
 * operation lasts from milliseconds to minutes: 20 ms later is not seen.
 */
const START_DELAY_MS = 20;
/** Most operations one look for work schedules (the rest come at the next renewal). */
const PICK_UP_BATCH = 500;

/** An operation this runner holds: the fence it claimed with, and how to stop its step work. */
interface Held extends Claim {
  readonly stop: AbortController;
}

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
 *
 * Several replicas may run on one database (DESIGN.md "Replicas"): each operation is run by the
 * replica that claimed it (leases.ts), every write carries the claim's fence, and a runner
 * that cannot renew its leases before the deadline stops its step work by itself (fenced).
 *
 * Over 400 lines on purpose: claiming, renewing, fencing, draining and the step loop all act on
 * the same private map of held claims, which is kept in one class so no other module can touch it.
 */
export class OperationRunner {
  readonly events = new EventEmitter<{ event: [OperationEvent] }>();
  private readonly kinds = new Map<string, OperationKind>();
  /** One promise chain per target: the serialisation point. */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly queued = new Set<string>();
  private readonly active = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private readonly held = new Map<string, Held>();
  private started = false;
  private renewing: NodeJS.Timeout | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private fencedSince: number | null = null;
  /** Set by a drain (handOver): nothing more is claimed here, what was held is given up. */
  private handingOver = false;
  private unlistenReleased: (() => Promise<void>) | undefined;

  constructor(
    private readonly db: Db,
    private readonly log: FastifyBaseLogger,
    /** Told when a write of an operation found the storage full (which the runner waits out). */
    private readonly onStorageFull?: (full: StorageFull) => void,
    private readonly lease: LeaseOptions = SINGLE_PROCESS,
  ) {
    this.events.setMaxListeners(0);
  }

  get replicaId(): string {
    return this.lease.replicaId;
  }

  /** True while the runner could not renew its leases in time: it acts on nothing (/readyz 503). */
  get fenced(): boolean {
    return this.fencedSince !== null;
  }

  /** True once a drain began: this replica claims nothing more until it restarts. */
  get draining(): boolean {
    return this.handingOver;
  }

  /** The operations this runner holds now. */
  get holding(): number {
    return this.held.size;
  }

  register(kind: OperationKind): void {
    this.kinds.set(kind.kind, kind);
  }

  /**
   * Resumes every unfinished operation it may claim, then runs new ones as they are enqueued,
   * and at every renewal takes up those no live replica holds.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.armDeadline();
    // A first renewal now: the heartbeat written at registration may be a while old by the time
    // the app is ready, and what is left to resume is taken up at once.
    await this.renew();
    this.renewing = setInterval(() => void this.renew(), this.lease.renewMs).unref();
    this.unlistenReleased = await this.lease.channels?.listen("released", () => {
      this.pickUp().catch((err: unknown) =>
        logWriteFailure(this.log, err, { replica: this.replicaId }, "looking for released operations failed", "warn"),
      );
    });
  }

  get isRunning(): boolean {
    return this.started && !this.abort.signal.aborted;
  }

  /**
   * One renewal: the heartbeat, the leases held (one statement), then a look for operations to
   * take over. A lease found lost stops that operation's step work; success re-arms the deadline.
   */
  async renew(): Promise<void> {
    const began = performance.now();
    try {
      await this.lease.heartbeat?.();
      const ids = [...this.held.keys()];
      const still = await renewLeases(this.db, this.replicaId, ids, this.lease.leaseMs);
      for (const id of ids) {
        const held = this.held.get(id);
        if (held && still.get(id) !== held.fence) this.drop(id, "its lease was lost to another claim");
      }
      if (this.fencedSince !== null) this.log.info({ replica: this.replicaId }, "leases renew again; acting again");
      this.fencedSince = null;
      this.armDeadline(began);
      await this.pickUp();
    } catch (err) {
      logWriteFailure(this.log, err, { replica: this.replicaId }, "renewing operation leases failed", "warn");
    }
  }

  /** Schedules what this replica may claim now; the claim in executeOnce decides. */
  private async pickUp(): Promise<void> {
    if (!this.isRunning || this.fenced || this.handingOver) return;
    for (const op of await claimableOperations(this.db, this.replicaId, PICK_UP_BATCH, [...this.kinds.keys()])) {
      this.schedule(op.id, op.targetId);
    }
  }

  /** Fences the runner `deadlineMs` after the renewal that began at `from`, unless another succeeds first. */
  private armDeadline(from = performance.now()): void {
    clearTimeout(this.deadline);
    if (this.abort.signal.aborted) return;
    const left = from + this.lease.deadlineMs - performance.now();
    this.deadline = setTimeout(() => this.fence(), Math.max(0, left)).unref();
  }

  /** No renewal in time: stop every operation held before any other replica may claim it. */
  private fence(): void {
    if (this.fencedSince === null) this.fencedSince = Date.now();
    this.log.error(
      { replica: this.replicaId, operations: [...this.held.keys()], deadlineMs: this.lease.deadlineMs },
      "leases not renewed before their deadline; this replica stops acting on its operations",
    );
    for (const id of [...this.held.keys()]) this.drop(id, "its lease could not be renewed in time");
  }

  /** Stops acting on a held operation: its step work is aborted and its writes are refused. */
  private drop(id: string, why: string): void {
    const held = this.held.get(id);
    if (!held) return;
    this.held.delete(id);
    held.stop.abort(new LeaseLost(id));
    this.log.warn({ operation: id, replica: this.replicaId }, `operation dropped: ${why}`);
  }

  /** Call after the transaction that recorded the operation has committed. */
  enqueue(op: Pick<OperationRow, "id" | "targetId">): void {
    // A draining replica leaves it pending: another replica picks it up at its next renewal.
    if (this.started && !this.abort.signal.aborted && !this.handingOver)
      this.schedule(op.id, op.targetId, START_DELAY_MS);
  }

  /** Resolves once every operation now queued or running has settled (tests and benchmarks). */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.allSettled([...this.active]);
  }

  /**
   * Stops taking work, waits for running steps to notice the abort and return, then releases
   * the leases it holds so that another replica takes the operations over at once.
   */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.abort.abort();
    clearInterval(this.renewing);
    clearTimeout(this.deadline);
    await settleWithin(this.active, timeoutMs);
    const ids = [...this.held.keys()];
    this.held.clear();
    await this.unlistenReleased?.().catch(() => undefined);
    try {
      await releaseLeases(this.db, this.replicaId, ids);
    } catch (err) {
      // Not fatal: the leases run out by themselves and another replica claims the operations then.
      logWriteFailure(this.log, err, { replica: this.replicaId }, "releasing operation leases failed", "warn");
      return;
    }
    await this.announceRelease(ids);
  }

  /** Wakes the other replicas to claim what was just released; a notice lost costs them one renewal. */
  private async announceRelease(ids: readonly string[]): Promise<void> {
    if (ids.length === 0 || !this.lease.channels) return;
    await this.lease.channels.notify("released", this.replicaId).catch((err: unknown) => {
      logWriteFailure(this.log, err, { replica: this.replicaId }, "announcing released leases failed", "warn");
    });
  }

  /**
   * A drain (POST /v1/replicas/{id}/drain): claims nothing more, stops the step work of what it
   * holds (steps return at their next check of the signal, as at a graceful stop), waits up to
   * `timeoutMs` for them, then releases those leases so that another replica takes the
   * operations over at once (announced: announceRelease). Heartbeat and renewals go on: the
   * replica still serves the API. A step still running after the wait writes nothing more (its
   * fence is gone).
   */
  async handOver(timeoutMs = 10_000): Promise<string[]> {
    if (this.handingOver) return [];
    this.handingOver = true;
    const ids = [...this.held.keys()];
    for (const id of ids) this.held.get(id)?.stop.abort(new OperationInterrupted());
    await settleWithin(this.active, timeoutMs);
    for (const id of ids) this.held.delete(id);
    await releaseLeases(this.db, this.replicaId, ids);
    await this.announceRelease(ids);
    this.log.info({ replica: this.replicaId, operations: ids }, "draining: operations handed over");
    return ids;
  }

  /** Runs the operation after those queued on its target, `delayMs` after they ended (and counted by idle() meanwhile). */
  private schedule(id: string, targetId: string, delayMs = 0): void {
    if (this.queued.has(id)) return;
    this.queued.add(id);
    const previous = this.chains.get(targetId) ?? Promise.resolve();
    // The chain must never reject: a rejected link would skip every later operation of the
    // target, and the rejection would go unhandled (which stops the process). A stop ends the
    // wait at once, and execute() then leaves the operation pending for the next start.
    const next = previous
      .then(() => (delayMs > 0 ? sleepUnlessAborted(delayMs, this.abort.signal) : undefined))
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
        if (!(await sleepUnlessAborted(delayMs, this.abort.signal))) return;
      }
    }
  }

  private async executeOnce(id: string): Promise<void> {
    if (this.abort.signal.aborted || this.fenced || this.handingOver) return;
    const op = await claimOperation(this.db, id, this.replicaId, this.lease.leaseMs, [...this.kinds.keys()]);
    // Finished, held by a live replica, behind an earlier operation on its target, or of a kind
    // this binary does not know (left pending for a replica that does).
    const kind = op && this.kinds.get(op.kind);
    if (!op || !kind) return;
    const claim: Held = { owner: this.replicaId, fence: op.fence, stop: new AbortController() };
    this.held.set(id, claim);
    const signal = AbortSignal.any([this.abort.signal, claim.stop.signal]);
    const cursor: Cursor = { step: 0, progress: {}, ...(op.cursor as Partial<Cursor> | null) };
    const ctx = this.contextFor(op, cursor, claim, signal);
    try {
      this.emit(op, "operation.started", "running");
      try {
        // Inside the try: params a kind cannot read fail the operation instead of leaving it running.
        const steps = await kind.steps(op);
        const named = cursor.stepName ? steps.findIndex((s) => s.name === cursor.stepName) : -1;
        for (let i = named >= 0 ? named : cursor.step; i < steps.length; i++) {
          const step = steps[i];
          if (!step) break;
          if (signal.aborted) throw new OperationInterrupted();
          cursor.step = i;
          cursor.stepName = step.name;
          await step.run(ctx);
          cursor.step = i + 1;
          cursor.stepName = steps[i + 1]?.name;
          if (!kind.keepProgress) cursor.progress = {};
          await this.saveCursor(id, claim, cursor);
          this.emit(op, "operation.step", "running", step.name);
        }
        await this.finish(op, claim, "succeeded", null);
      } catch (err) {
        if (claim.stop.signal.reason instanceof OperationInterrupted) {
          this.log.info({ operation: id, kind: op.kind }, "operation interrupted: this replica drains; handed over");
          return;
        }
        if (err instanceof LeaseLost || claim.stop.signal.aborted) {
          this.log.warn({ operation: id, kind: op.kind, replica: this.replicaId }, "operation stopped: lease lost");
          return;
        }
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
        await this.finish(op, claim, "failed", error.message);
      }
    } catch (err) {
      if (err instanceof LeaseLost) return;
      throw err;
    } finally {
      // Kept while interrupted by a stop, which releases it; given up otherwise (finished, lost,
      // or the database away: the next attempt claims it again).
      if (!this.abort.signal.aborted && this.held.get(id) === claim) this.held.delete(id);
    }
  }

  private contextFor(op: OperationRow, cursor: Cursor, claim: Held, signal: AbortSignal): StepContext {
    return {
      op,
      db: this.db,
      log: this.log.child({ operation: op.id, kind: op.kind }),
      signal,
      fence: claim.fence,
      progress: cursor.progress,
      saveProgress: async (patch) => {
        Object.assign(cursor.progress, patch);
        try {
          await this.saveCursor(op.id, claim, cursor);
        } catch (err) {
          if (!(err instanceof LeaseLost)) throw err;
          // Steps save progress in the background too: a lost lease stops them through their
          // signal (and the next cursor write) rather than as a rejection nobody awaits.
          this.drop(op.id, "a write found its fence raised by another claim");
          claim.stop.abort(err);
        }
      },
      announceBatch: (batch) =>
        this.emit(op, "operation.step", "running", cursor.stepName, undefined, undefined, batch),
    };
  }

  /** Every write of an operation names the claim's fence: a stale one changes nothing and throws LeaseLost. */
  private async saveCursor(id: string, claim: Claim, cursor: Cursor): Promise<void> {
    const rows = await this.db
      .update(operations)
      .set({ cursor: { ...cursor } })
      .where(heldBy(id, claim))
      .returning({ id: operations.id });
    if (rows.length === 0) throw new LeaseLost(id);
  }

  private async finish(
    op: OperationRow,
    claim: Claim,
    state: "succeeded" | "failed",
    error: string | null,
  ): Promise<void> {
    const finishedAt = new Date();
    const rows = await this.db
      .update(operations)
      .set({ state, error, finishedAt: finishedAt.toISOString(), leaseUntil: null })
      .where(heldBy(op.id, claim))
      .returning({ id: operations.id });
    if (rows.length === 0) throw new LeaseLost(op.id);
    // From the first start (the claim keeps it across resumes) to the end: the metrics' duration.
    const durationMs = op.startedAt ? finishedAt.getTime() - Date.parse(op.startedAt) : undefined;
    this.emit(op, "operation.finished", state, undefined, error, durationMs);
  }

  private emit(
    op: OperationRow,
    type: OperationEvent["type"],
    state: OperationEvent["state"],
    step?: string,
    error?: string | null,
    durationMs?: number,
    batch?: StepBatch,
  ): void {
    const event: OperationEvent = {
      type,
      operationId: op.id,
      projectId: op.projectId,
      kind: op.kind,
      targetId: op.targetId,
      state,
      ...(step === undefined ? {} : { step }),
      ...(batch === undefined ? {} : { batch }),
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
