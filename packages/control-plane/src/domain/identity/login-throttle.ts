/**
 * Slows password guessing at the public Keystone login. Failures are counted per client
 * address and user, and per client address alone; once a count reaches its limit within the
 * window, that key is refused (429 with Retry-After) until the window of its first failure
 * ends. A success clears the address-and-user count. In memory: a restart forgets the counts,
 * which costs a guesser one restart of the server per window, and the map is bounded so a
 * flood of distinct keys cannot grow it without end.
 */
export interface LoginThrottleOptions {
  /** Failures of one user from one address within the window (default 10). */
  perUser: number;
  /** Failures from one address within the window, whatever the user (default 100). */
  perAddress: number;
  windowMs: number;
  /** Keys kept at most; the oldest go first. */
  maxKeys: number;
}

const DEFAULTS: LoginThrottleOptions = { perUser: 10, perAddress: 100, windowMs: 5 * 60_000, maxKeys: 50_000 };

interface Count {
  failures: number;
  since: number;
}

export class LoginThrottle {
  private readonly counts = new Map<string, Count>();
  private readonly options: LoginThrottleOptions;

  constructor(options: Partial<LoginThrottleOptions> = {}) {
    this.options = { ...DEFAULTS, ...options };
  }

  /** Milliseconds until this address may try this user again; 0: now. */
  blockedFor(address: string, user: string, now = Date.now()): number {
    const waits = [
      this.waitOf(userKey(address, user), this.options.perUser, now),
      this.waitOf(addressKey(address), this.options.perAddress, now),
    ];
    return Math.max(...waits);
  }

  failed(address: string, user: string, now = Date.now()): void {
    this.bump(userKey(address, user), now);
    this.bump(addressKey(address), now);
  }

  succeeded(address: string, user: string): void {
    this.counts.delete(userKey(address, user));
  }

  private waitOf(key: string, limit: number, now: number): number {
    const count = this.counts.get(key);
    if (!count) return 0;
    const ends = count.since + this.options.windowMs;
    if (now >= ends) {
      this.counts.delete(key);
      return 0;
    }
    return count.failures >= limit ? ends - now : 0;
  }

  private bump(key: string, now: number): void {
    const count = this.counts.get(key);
    if (count && now < count.since + this.options.windowMs) {
      count.failures += 1;
      return;
    }
    this.counts.delete(key);
    this.counts.set(key, { failures: 1, since: now });
    // A Map iterates in insertion order: the first key is the oldest window.
    while (this.counts.size > this.options.maxKeys) {
      const oldest = this.counts.keys().next().value;
      if (oldest === undefined) break;
      this.counts.delete(oldest);
    }
  }
}

const userKey = (address: string, user: string) => `u\u0000${address}\u0000${user.toLowerCase()}`;
const addressKey = (address: string) => `a\u0000${address}`;
