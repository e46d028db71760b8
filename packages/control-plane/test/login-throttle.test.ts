import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { loginFailures, type Store } from "@keelson/db";
import { afterEach, describe, expect, it } from "vitest";
import { dropDatabaseFor } from "../../../test/support/postgres-database.ts";
import { LoginThrottle } from "../src/domain/identity/login-throttle.ts";
import { openTestStore, TEST_DIALECT } from "./helpers.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `n` stores on one fresh database, as `n` replicas would have. */
async function stores(n: number): Promise<Store[]> {
  const dataDir = mkdtempSync(join(tmpdir(), "keelson-throttle-"));
  const opened: Store[] = [];
  for (let i = 0; i < n; i++) opened.push(await openTestStore(dataDir));
  cleanups.push(async () => {
    for (const s of opened) await s.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (TEST_DIALECT === "postgres") await dropDatabaseFor(dataDir);
  });
  return opened;
}

describe("LoginThrottle", () => {
  it("blocks a user from an address at the limit until the window of the first failure ends", async () => {
    const [store] = (await stores(1)) as [Store];
    const throttle = new LoginThrottle(store.db, { perUser: 3, perAddress: 100, windowMs: 1_500 });
    for (let i = 0; i < 3; i++) {
      expect(await throttle.blockedFor("10.0.0.1", "p/alice")).toBe(0);
      await throttle.failed("10.0.0.1", "p/alice");
    }
    const wait = await throttle.blockedFor("10.0.0.1", "p/alice");
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(1_500);
    // Another address, or another user, is not blocked; case does not make another user.
    expect(await throttle.blockedFor("10.0.0.2", "p/alice")).toBe(0);
    expect(await throttle.blockedFor("10.0.0.1", "p/bob")).toBe(0);
    expect(await throttle.blockedFor("10.0.0.1", "p/ALICE")).toBeGreaterThan(0);
    await sleep(wait + 50);
    expect(await throttle.blockedFor("10.0.0.1", "p/alice")).toBe(0);
    // A new window starts from scratch.
    await throttle.failed("10.0.0.1", "p/alice");
    expect(await throttle.blockedFor("10.0.0.1", "p/alice")).toBe(0);
    expect((await store.db.select().from(loginFailures)).find((r) => r.key.includes("p/alice"))?.failures).toBe(1);
  });

  it("blocks an address that tries many users; a success clears only that user's count", async () => {
    const [store] = (await stores(1)) as [Store];
    const throttle = new LoginThrottle(store.db, { perUser: 100, perAddress: 5, windowMs: 60_000 });
    for (let i = 0; i < 5; i++) await throttle.failed("10.0.0.9", `p/user-${i}`);
    expect(await throttle.blockedFor("10.0.0.9", "p/someone-else")).toBeGreaterThan(59_000);
    expect(await throttle.blockedFor("10.0.0.8", "p/someone-else")).toBe(0);
    await throttle.succeeded("10.0.0.9", "p/user-0");
    expect(await throttle.blockedFor("10.0.0.9", "p/user-0")).toBeGreaterThan(0);
  });

  it("replicas share one budget: failures counted on two replicas at once add up, none lost", async () => {
    const [sa, sb] = (await stores(2)) as [Store, Store];
    const options = { perUser: 20, perAddress: 1_000, windowMs: 60_000 };
    const a = new LoginThrottle(sa.db, options);
    const b = new LoginThrottle(sb.db, options);
    // 10 on each, all at once: the upsert is atomic, so the count is 20, not less.
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b).failed("10.0.0.1", "p/alice")));
    const rows = await sa.db.select().from(loginFailures);
    expect(rows.map((r) => r.failures)).toEqual([20, 20]);
    expect(await a.blockedFor("10.0.0.1", "p/alice")).toBeGreaterThan(0);
    expect(await b.blockedFor("10.0.0.1", "p/alice")).toBeGreaterThan(0);
  });

  it("prunes counts whose window ended", async () => {
    const [store] = (await stores(1)) as [Store];
    const throttle = new LoginThrottle(store.db, { perUser: 3, perAddress: 100, windowMs: 300 });
    await throttle.failed("10.0.0.1", "p/a");
    await sleep(400);
    await throttle.failed("10.0.0.2", "p/b");
    expect((await store.db.select().from(loginFailures)).map((r) => r.key).sort()).toEqual([
      '["a","10.0.0.2"]',
      '["u","10.0.0.2","p/b"]',
    ]);
  });
});
