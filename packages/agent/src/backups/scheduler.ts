import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type BackupKind, backupFileName, newestBackupTime, pruneBackups } from "./files.ts";
import type { BackupPlan } from "./plan.ts";

/**
 * Runs a master's etcd backups on the plan's schedule: interval backups every `everyMs`
 * (continuing from the newest interval backup on disk, so an agent restart keeps the cadence),
 * daily ones at hh:mm UTC. One run at a time: a backup that comes due while another runs waits
 * for it. After each good run the kind is pruned to its retention count, oldest first. Every
 * run, and a plan that cannot be scheduled (its directory cannot be made), is reported.
 */

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // A pending backup must not keep a stopping agent alive.
    t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface BackupRunReport {
  ok: boolean;
  error?: string;
  file?: string;
  /** When the run (or the refusal) happened, ISO 8601. */
  at: string;
  kind?: BackupKind;
}

export interface BackupSchedulerOptions {
  /** Writes one snapshot to `file` (complete or not at all). */
  snapshot: (file: string, signal: AbortSignal) => Promise<void>;
  report: (report: BackupRunReport) => void;
  clock?: Clock;
  /** After a failed interval run the next try comes this soon (if sooner than the interval). */
  retryMs?: number;
}

const DAY_MS = 24 * 60 * 60_000;
/** Node timers overflow past ~24.8 days; farther due times are reached by waking up daily. */
const MAX_TIMER_MS = DAY_MS;

/** The first hh:mm UTC at or after `fromMs`. */
export function nextDailyAt(fromMs: number, hour: number, minute: number): number {
  const d = new Date(fromMs);
  const today = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), hour, minute);
  return today >= fromMs ? today : today + DAY_MS;
}

export class BackupScheduler {
  private readonly clock: Clock;
  private plan: BackupPlan | undefined;
  private planKey = "";
  private timer: unknown;
  private nextInterval: number | undefined;
  private nextDaily: number | undefined;
  private busy = false;
  private current: Promise<void> = Promise.resolve();
  private abort = new AbortController();
  /** Runs taken so far (tests; the log). */
  runs = 0;

  constructor(private readonly options: BackupSchedulerOptions) {
    this.clock = options.clock ?? realClock;
  }

  /** Applies a plan (undefined: no backups). The same plan again changes nothing (false). */
  configure(plan: BackupPlan | undefined): boolean {
    const key = plan ? JSON.stringify(plan) : "";
    if (key === this.planKey) return false;
    this.planKey = key;
    this.disarm();
    this.plan = undefined;
    this.nextInterval = undefined;
    this.nextDaily = undefined;
    if (!plan) {
      // Backups turned off or the node left: a snapshot in flight is moot.
      this.abort.abort(new Error("etcd backups stopped"));
      this.abort = new AbortController();
      return true;
    }
    try {
      mkdirSync(plan.dir, { recursive: true, mode: 0o700 });
    } catch (err) {
      // Not remembered as applied: the same plan again (a re-sent join, a restart) tries anew.
      this.planKey = "";
      this.options.report({
        ok: false,
        error: `cannot schedule etcd backups: cannot create ${plan.dir}: ${(err as Error).message}`,
        at: new Date(this.clock.now()).toISOString(),
      });
      return true;
    }
    this.plan = plan;
    const now = this.clock.now();
    if (plan.interval) {
      const newest = newestBackupTime(plan.dir, "interval");
      this.nextInterval = Math.max(now, (newest ?? now) + plan.interval.everyMs);
    }
    if (plan.daily) this.nextDaily = nextDailyAt(now, plan.daily.hour, plan.daily.minute);
    this.arm();
    return true;
  }

  /** When the next backup of each kind is due (ms since the epoch), for the log and tests. */
  get due(): { interval?: number; daily?: number } {
    return { interval: this.nextInterval, daily: this.nextDaily };
  }

  /** Resolves once no run is in progress. */
  async idle(): Promise<void> {
    while (this.busy) await this.current;
  }

  async close(): Promise<void> {
    this.configure(undefined);
    await this.idle();
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    this.disarm();
    if (!this.plan || this.busy) return;
    const due = Math.min(this.nextInterval ?? Number.POSITIVE_INFINITY, this.nextDaily ?? Number.POSITIVE_INFINITY);
    if (!Number.isFinite(due)) return;
    const wait = Math.min(Math.max(0, due - this.clock.now()), MAX_TIMER_MS);
    this.timer = this.clock.setTimeout(() => this.tick(), wait);
  }

  private tick(): void {
    this.timer = undefined;
    const plan = this.plan;
    if (!plan || this.busy) return;
    const now = this.clock.now();
    const kinds: BackupKind[] = [];
    if (this.nextInterval !== undefined && this.nextInterval <= now) kinds.push("interval");
    if (this.nextDaily !== undefined && this.nextDaily <= now) kinds.push("daily");
    if (kinds.length === 0) {
      this.arm();
      return;
    }
    this.busy = true;
    const signal = this.abort.signal;
    this.current = (async () => {
      for (const kind of kinds) {
        if (signal.aborted || this.plan !== plan) break;
        await this.runOne(plan, kind, signal);
      }
    })().finally(() => {
      this.busy = false;
      this.arm();
    });
  }

  private async runOne(plan: BackupPlan, kind: BackupKind, signal: AbortSignal): Promise<void> {
    const startedAt = this.clock.now();
    const file = join(plan.dir, backupFileName(kind, new Date(startedAt)));
    let report: BackupRunReport;
    let ok = false;
    try {
      await this.options.snapshot(file, signal);
      this.runs++;
      pruneBackups(plan.dir, kind, kind === "interval" ? (plan.interval?.keep ?? 1) : (plan.daily?.keep ?? 1));
      ok = true;
      report = { ok: true, file, kind, at: new Date(this.clock.now()).toISOString() };
    } catch (err) {
      report = { ok: false, error: (err as Error).message, kind, at: new Date(this.clock.now()).toISOString() };
    }
    // A plan replaced meanwhile has its own times; this run only reports.
    if (this.plan === plan) {
      if (kind === "interval" && plan.interval) {
        const every = plan.interval.everyMs;
        this.nextInterval = startedAt + (ok ? every : Math.min(every, this.options.retryMs ?? every));
      }
      if (kind === "daily" && plan.daily) {
        this.nextDaily = nextDailyAt(startedAt + 60_000, plan.daily.hour, plan.daily.minute);
      }
    }
    if (!signal.aborted) this.options.report(report);
  }
}
