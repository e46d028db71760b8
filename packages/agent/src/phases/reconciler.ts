import { setTimeout as sleep } from "node:timers/promises";
import type { NodePhaseStatus } from "@keelson/protocol";
import type { Logger } from "pino";
import type { EngineResult, PhaseEngine } from "./engine.ts";

/**
 * Keeps the phases running while the node should run. Each round checks status; when a phase
 * fails, the round repairs: stop down to the failed phase and start again from it, or on every
 * `fullRestartEvery`-th consecutive attempt stop everything and start from the first phase
 * (certificates are reused unless asked to regenerate). The node is `converging` while it
 * repairs, `failed` once `retryBudget` attempts in a row have not fixed it (it keeps trying,
 * more slowly, so a fix made by hand is picked up), and `ok` when every phase runs.
 */

export interface ReconcileOptions {
  /** Between status checks while everything runs. */
  checkIntervalMs: number;
  /** Delay before the first repair attempt, doubled per attempt up to maxRetryIntervalMs. */
  retryIntervalMs: number;
  maxRetryIntervalMs: number;
  /** Consecutive failed attempts after which the node is `failed`. */
  retryBudget: number;
  /** Every Nth consecutive attempt is a full restart (0: never). */
  fullRestartEvery: number;
  /** Pace of attempts once the budget is spent. */
  failedRetryIntervalMs: number;
}

export const DEFAULT_RECONCILE: ReconcileOptions = {
  checkIntervalMs: 30_000,
  retryIntervalMs: 2_000,
  maxRetryIntervalMs: 60_000,
  retryBudget: 10,
  fullRestartEvery: 3,
  failedRetryIntervalMs: 120_000,
};

export type RepairKind = "resume" | "full-restart";

export class Reconciler {
  readonly options: ReconcileOptions;
  /** Consecutive repair attempts since the node was last `ok`. */
  attempts = 0;
  private loop: Promise<void> | undefined;
  private controller: AbortController | undefined;
  private wake: AbortController | undefined;
  private regenerateNext = false;

  constructor(
    private readonly engine: PhaseEngine,
    private readonly log: Logger,
    options: Partial<ReconcileOptions> = {},
    /** Observes each repair (tests count full restarts). */
    private readonly onRepair?: (kind: RepairKind, attempt: number) => void,
  ) {
    this.options = { ...DEFAULT_RECONCILE, ...options };
  }

  get running(): boolean {
    return this.loop !== undefined;
  }

  get nodeStatus(): NodePhaseStatus {
    return this.engine.nodeStatus;
  }

  /**
   * Starts the loop (idempotent). The first round starts every phase, unless every phase is
   * already recorded running (an agent restart), in which case it checks status first.
   */
  run(options: { regenerateCerts?: boolean } = {}): void {
    if (this.loop) return;
    this.regenerateNext = options.regenerateCerts ?? false;
    const controller = new AbortController();
    this.controller = controller;
    this.attempts = 0;
    this.loop = this.runLoop(controller.signal).finally(() => {
      if (this.controller === controller) {
        this.loop = undefined;
        this.controller = undefined;
      }
    });
  }

  /** Ends the loop after the current step (phases keep their state). */
  async halt(): Promise<void> {
    const loop = this.loop;
    if (!loop) return;
    this.controller?.abort();
    this.wake?.abort();
    await loop;
  }

  /** Skips the current wait: check now (after a config change, or on request). */
  poke(): void {
    this.wake?.abort();
  }

  /** Halts the loop and stops every phase (drain first); `ok` when all stopped cleanly. */
  async shutdown(intent: "stop" | "detach" = "stop"): Promise<EngineResult> {
    await this.halt();
    const result = await this.engine.stop({ intent });
    this.engine.setNodeStatus(result.ok ? "ok" : "failed");
    return result;
  }

  private async runLoop(signal: AbortSignal): Promise<void> {
    // After an agent restart the phases may all still run: check before touching anything.
    const resumeChecked = this.engine.allRunning() && !this.regenerateNext;
    this.engine.setNodeStatus(resumeChecked ? "ok" : "converging");
    let result = resumeChecked
      ? await this.engine.status()
      : await this.engine.start({ regenerateCerts: this.regenerateNext, intent: "start" });
    this.regenerateNext = false;
    while (!signal.aborted) {
      if (result.ok) {
        if (this.attempts > 0) this.log.info({ attempts: this.attempts }, "node converged");
        this.attempts = 0;
        this.engine.setNodeStatus("ok");
        if (!(await this.pause(this.options.checkIntervalMs, signal))) break;
        result = await this.engine.status();
        continue;
      }
      const overBudget = this.attempts >= this.options.retryBudget;
      this.engine.setNodeStatus(overBudget ? "failed" : "converging");
      const delay = overBudget
        ? this.options.failedRetryIntervalMs
        : Math.min(this.options.retryIntervalMs * 2 ** this.attempts, this.options.maxRetryIntervalMs);
      if (!(await this.pause(delay, signal))) break;
      result = await this.repair(result);
    }
  }

  private async repair(previous: EngineResult): Promise<EngineResult> {
    this.attempts++;
    const every = this.options.fullRestartEvery;
    const kind: RepairKind = every > 0 && this.attempts % every === 0 ? "full-restart" : "resume";
    // Look again before choosing where to resume: the failure seen may be a later phase
    // reporting a lower one's trouble (wait-for-services sees a service another phase owns), or
    // things changed during the wait. Status is ascending, so this finds the lowest failure.
    const failure = kind === "resume" ? await this.engine.status() : previous;
    if (failure.ok) return failure;
    this.log.warn({ attempt: this.attempts, kind, failed: failure.failed, error: failure.error }, "repairing phases");
    this.onRepair?.(kind, this.attempts);
    if (kind === "full-restart") {
      await this.engine.stop({ intent: "stop", skipStopOnly: true });
      return this.engine.start({ intent: "restart" });
    }
    await this.engine.stop({ to: failure.failed, intent: "stop", skipStopOnly: true });
    const started = await this.engine.start({ from: failure.failed, intent: "restart" });
    // A resume only re-ran the upper phases; confirm the lower ones still hold too.
    return started.ok ? this.engine.status() : started;
  }

  /** Waits, unless halted (false) or poked (true, early). */
  private async pause(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    const wake = new AbortController();
    this.wake = wake;
    try {
      await sleep(ms, undefined, { signal: AbortSignal.any([signal, wake.signal]) });
    } catch {
      // Aborted: halted or poked.
    }
    return !signal.aborted;
  }
}
