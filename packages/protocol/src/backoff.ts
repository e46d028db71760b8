/**
 * Reconnect delays: exponential growth with jitter, capped, and reset once a connection has
 * proved stable. Jitter spreads thousands of agents that lost the control plane at the same
 * moment so they do not all come back in the same millisecond; the reset-on-stable rule keeps
 * a link that flaps (connects, then drops at once) from hammering the server at the minimum
 * delay.
 */
export interface BackoffOptions {
  /** Delay before the first retry (before jitter). Default 500 ms. */
  initialMs?: number;
  /** No delay is ever longer than this. Default 30 s. */
  maxMs?: number;
  /** Growth per failed attempt. Default 2. */
  factor?: number;
  /** Fraction of each delay that is random: 0.5 gives delays in [base/2, base]. Default 0.5. */
  jitter?: number;
  /** A connection that lasted this long resets the sequence. Default 10 s. */
  stableAfterMs?: number;
  /** Injected for tests; defaults to Math.random. */
  random?: () => number;
}

export class Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  readonly jitter: number;
  readonly stableAfterMs: number;
  private readonly random: () => number;
  private attempt = 0;
  private connectedAt: number | undefined;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 500;
    this.maxMs = options.maxMs ?? 30_000;
    this.factor = options.factor ?? 2;
    this.jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5));
    this.stableAfterMs = options.stableAfterMs ?? 10_000;
    this.random = options.random ?? Math.random;
    if (!(this.initialMs > 0) || !(this.maxMs >= this.initialMs) || !(this.factor >= 1)) {
      throw new RangeError("backoff needs 0 < initialMs <= maxMs and factor >= 1");
    }
  }

  /** Failed attempts since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /** The delay before the next attempt; each call counts one more failure. */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * this.factor ** this.attempt);
    // factor ** attempt may reach Infinity after ~1000 failures; Math.min still caps it.
    this.attempt++;
    const low = base * (1 - this.jitter);
    return Math.round(low + this.random() * (base - low));
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Call when a connection is established. */
  connected(now = Date.now()): void {
    this.connectedAt = now;
  }

  /** Call when it drops: resets the sequence if the connection had been stable. */
  disconnected(now = Date.now()): void {
    if (this.connectedAt !== undefined && now - this.connectedAt >= this.stableAfterMs) this.reset();
    this.connectedAt = undefined;
  }
}
