import { checkEtcdHealth, type EtcdHealth, type EtcdHealthTarget, etcdWhole } from "./etcd-health.ts";

/**
 * The etcd part of a master's node reports. A check belongs to one run of the start-etcd
 * phase (`run`, its start time): a report never carries what was seen before this member's
 * etcd last started, so after a restart the control plane cannot take the cluster as it was
 * before for the cluster as it is now. The first report of a run checks at once; while the
 * cluster is not whole the watch checks again every `intervalMs` and asks for a report when
 * the counts change, so the control plane hears when etcd is whole again without waiting for
 * a phase change. Healthy clusters are not re-checked (reports reuse the run's result).
 */

export interface EtcdSubject {
  /** Identifies the start-etcd run (its startedAt); a new run discards the previous check. */
  run: string;
  target: EtcdHealthTarget;
}

export type EtcdCheck = (target: EtcdHealthTarget, signal: AbortSignal) => Promise<EtcdHealth>;

export interface EtcdWatchOptions {
  /** What to check now, or undefined when this node reports no etcd (not a master, etcd not running). */
  subject: () => EtcdSubject | undefined;
  /** The counts changed: send a report. */
  changed: () => void;
  check?: EtcdCheck;
  /** Re-check period while the cluster is not whole. Default 1 s. */
  intervalMs?: number;
  /** After this many re-checks of one run, re-check every `slowIntervalMs` instead. Default 300. */
  fastChecks?: number;
  /** Default 15 s: a member down for good does not cost two etcdctl runs a second forever. */
  slowIntervalMs?: number;
}

export class EtcdHealthWatch {
  private last: { run: string; health: EtcdHealth } | undefined;
  private inflight: { run: string; promise: Promise<EtcdHealth> } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private rechecks = 0;
  private closed = false;
  private readonly abort = new AbortController();

  constructor(private readonly options: EtcdWatchOptions) {}

  /** The etcd field of the report being built now (undefined: the report has none). */
  async forReport(): Promise<EtcdHealth | undefined> {
    const subject = this.closed ? undefined : this.options.subject();
    if (!subject) {
      this.reset();
      return undefined;
    }
    if (this.last?.run === subject.run) return this.last.health;
    const health = await this.check(subject);
    // The run may have ended while the check ran; what it found still describes that moment.
    if (this.options.subject()?.run === subject.run) this.keep(subject.run, health);
    return health;
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
    this.reset();
  }

  private keep(run: string, health: EtcdHealth): void {
    if (this.last?.run !== run) this.rechecks = 0;
    this.last = { run, health };
    if (etcdWhole(health)) {
      clearTimeout(this.timer);
      this.timer = undefined;
    } else {
      this.schedule();
    }
  }

  private reset(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.last = undefined;
    this.rechecks = 0;
  }

  private schedule(): void {
    if (this.closed || this.timer) return;
    const fast = this.rechecks < (this.options.fastChecks ?? 300);
    const delay = fast ? (this.options.intervalMs ?? 1_000) : (this.options.slowIntervalMs ?? 15_000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.recheck();
    }, delay);
    this.timer.unref?.();
  }

  private async recheck(): Promise<void> {
    const subject = this.closed ? undefined : this.options.subject();
    const previous = this.last;
    // Membership ended, etcd stopped, or a new run began (its first report checks by itself).
    if (!subject || previous?.run !== subject.run) {
      if (!subject) this.reset();
      return;
    }
    this.rechecks++;
    const health = await this.check(subject);
    if (this.closed || this.last?.run !== subject.run || this.options.subject()?.run !== subject.run) return;
    const differs = health.members !== previous.health.members || health.healthy !== previous.health.healthy;
    this.keep(subject.run, health);
    if (differs) this.options.changed();
  }

  /** One check at a time: a report built during a re-check waits for it instead of running another. */
  private check(subject: EtcdSubject): Promise<EtcdHealth> {
    if (this.inflight?.run === subject.run) return this.inflight.promise;
    const check = this.options.check ?? checkEtcdHealth;
    const promise = check(subject.target, this.abort.signal)
      // A check that throws reads like one that found nothing: the report still goes out.
      .catch((): EtcdHealth => ({ members: 0, healthy: 0, checkedAt: new Date().toISOString() }))
      .finally(() => {
        if (this.inflight?.promise === promise) this.inflight = undefined;
      });
    this.inflight = { run: subject.run, promise };
    return promise;
  }
}
