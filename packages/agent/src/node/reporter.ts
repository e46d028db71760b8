/**
 * Coalesces node reports: phases change in bursts (a start touches every phase twice within
 * milliseconds), and the control plane needs the latest picture, not every step. The first
 * change after a quiet period goes out at once, later ones at most every `intervalMs`, and the
 * last change of a burst is always sent. Reports are built when sent, so they carry the state
 * of that moment, and go out one at a time in order.
 */
export class CoalescingReporter {
  private timer: NodeJS.Timeout | undefined;
  private lastSentAt = Number.NEGATIVE_INFINITY;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    /** Builds and sends one report; false when there was no link to send it on. */
    private readonly sendNow: () => Promise<boolean>,
    private readonly intervalMs = 200,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  /** Something changed: report soon. */
  changed(): void {
    if (this.closed || this.timer) return;
    const wait = Math.max(0, this.lastSentAt + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, wait);
  }

  /** Reports now (after a reconnect, or before answering a command); resolves once sent. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.closed) return this.chain;
    this.lastSentAt = Date.now();
    this.chain = this.chain.then(async () => {
      try {
        await this.sendNow();
      } catch (err) {
        this.onError(err);
      }
    });
    return this.chain;
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
