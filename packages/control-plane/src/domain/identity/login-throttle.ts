import { type Db, databaseTime, dialectOf, loginFailures } from "@keelson/db";
import { gt, inArray, lte, sql } from "drizzle-orm";

/**
 * Slows password guessing at the public Keystone login. Failures are counted per client
 * address and user, and per client address alone; once a count reaches its limit within the
 * window, that key is refused (429 with Retry-After) until the window of its first failure
 * ends. A success clears the address-and-user count.
 *
 * The counts live in the database (`login_failures`), windows by the database's clock, each
 * failure one atomic upsert: every replica counts against the same budget, so N replicas do not
 * give a guesser N times the tries, and a restart forgets nothing. Rows of ended windows are
 * pruned as failures come, so a flood of distinct keys leaves at most one window's worth.
 */
export interface LoginThrottleOptions {
  /** Failures of one user from one address within the window (default 10). */
  perUser: number;
  /** Failures from one address within the window, whatever the user (default 100). */
  perAddress: number;
  windowMs: number;
}

const DEFAULTS: LoginThrottleOptions = { perUser: 10, perAddress: 100, windowMs: 5 * 60_000 };

export class LoginThrottle {
  private readonly options: LoginThrottleOptions;
  private prunedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly db: Db,
    options: Partial<LoginThrottleOptions> = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  /** Milliseconds until this address may try this user again; 0: now. One read of both counts. */
  async blockedFor(address: string, user: string): Promise<number> {
    const keys = { [userKey(address, user)]: this.options.perUser, [addressKey(address)]: this.options.perAddress };
    const rows = await this.db
      .select({
        key: loginFailures.key,
        failures: loginFailures.failures,
        since: loginFailures.since,
        now: databaseTime(dialectOf(this.db)),
      })
      .from(loginFailures)
      .where(inArray(loginFailures.key, Object.keys(keys)));
    let wait = 0;
    for (const row of rows) {
      const left = Date.parse(row.since) + this.options.windowMs - Date.parse(row.now);
      if (left > 0 && row.failures >= (keys[row.key] ?? Number.POSITIVE_INFINITY)) wait = Math.max(wait, left);
    }
    return wait;
  }

  /**
   * Counts a failure against both keys in one statement: a count whose window is still open goes
   * up by one, an ended one starts again at 1 from now.
   */
  async failed(address: string, user: string): Promise<void> {
    const dialect = dialectOf(this.db);
    const now = databaseTime(dialect);
    const open = gt(loginFailures.since, databaseTime(dialect, -this.options.windowMs));
    await this.db
      .insert(loginFailures)
      .values([userKey(address, user), addressKey(address)].map((key) => ({ key, failures: 1, since: now })))
      .onConflictDoUpdate({
        target: loginFailures.key,
        set: {
          failures: sql`case when ${open} then ${loginFailures.failures} + 1 else 1 end`,
          since: sql`case when ${open} then ${loginFailures.since} else ${now} end`,
        },
      });
    await this.pruneNowAndThen();
  }

  async succeeded(address: string, user: string): Promise<void> {
    await this.db.delete(loginFailures).where(inArray(loginFailures.key, [userKey(address, user)]));
  }

  /** Removes counts whose window ended, at most once a tenth of a window per replica. */
  private async pruneNowAndThen(): Promise<void> {
    if (performance.now() - this.prunedAt < this.options.windowMs / 10) return;
    this.prunedAt = performance.now();
    await this.db
      .delete(loginFailures)
      .where(lte(loginFailures.since, databaseTime(dialectOf(this.db), -this.options.windowMs)));
  }
}

// JSON: unambiguous whatever the user name holds (PostgreSQL's text takes no NUL separator).
const userKey = (address: string, user: string) => JSON.stringify(["u", address, user.toLowerCase()]);
const addressKey = (address: string) => JSON.stringify(["a", address]);
