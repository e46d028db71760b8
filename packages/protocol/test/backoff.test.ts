import { describe, expect, it } from "vitest";
import { Backoff } from "../src/index.ts";

describe("Backoff", () => {
  it("grows exponentially from the initial delay (no jitter)", () => {
    const b = new Backoff({ initialMs: 100, maxMs: 10_000, jitter: 0 });
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 400, 800]);
    expect(b.attempts).toBe(4);
  });

  it("keeps every jittered delay within [base * (1 - jitter), base]", () => {
    for (const r of [0, 0.25, 0.999]) {
      const b = new Backoff({ initialMs: 1000, maxMs: 30_000, jitter: 0.5, random: () => r });
      for (let i = 0; i < 10; i++) {
        const base = Math.min(30_000, 1000 * 2 ** i);
        const delay = b.next();
        expect(delay).toBeGreaterThanOrEqual(base / 2);
        expect(delay).toBeLessThanOrEqual(base);
      }
    }
  });

  it("spreads delays with the random source (jitter)", () => {
    const values = [0.1, 0.9];
    const a = new Backoff({ initialMs: 1000, random: () => values[0] as number });
    const b = new Backoff({ initialMs: 1000, random: () => values[1] as number });
    expect(a.next()).toBe(550);
    expect(b.next()).toBe(950);
    const seen = new Set(Array.from({ length: 50 }, () => new Backoff({ initialMs: 1000 }).next()));
    expect(seen.size).toBeGreaterThan(10);
  });

  it("never exceeds the cap, even after very many failures", () => {
    const b = new Backoff({ initialMs: 500, maxMs: 30_000, random: () => 1 });
    let last = 0;
    for (let i = 0; i < 2000; i++) last = b.next();
    expect(last).toBe(30_000);
    expect(Number.isFinite(last)).toBe(true);
    const defaults = new Backoff({ random: () => 1 });
    for (let i = 0; i < 20; i++) expect(defaults.next()).toBeLessThanOrEqual(30_000);
  });

  it("reset() starts over at the initial delay", () => {
    const b = new Backoff({ initialMs: 100, jitter: 0 });
    b.next();
    b.next();
    b.reset();
    expect(b.attempts).toBe(0);
    expect(b.next()).toBe(100);
  });

  it("resets after a stable connection, not after a flapping one", () => {
    const b = new Backoff({ initialMs: 100, jitter: 0, stableAfterMs: 10_000 });
    b.next();
    b.next();
    b.next();
    // Connected for 1 s only: still backing off.
    b.connected(0);
    b.disconnected(1_000);
    expect(b.next()).toBe(800);
    // Connected for 10 s: the next failure starts from the beginning.
    b.connected(10_000);
    b.disconnected(20_000);
    expect(b.next()).toBe(100);
  });

  it("refuses nonsensical settings", () => {
    expect(() => new Backoff({ initialMs: 0 })).toThrow(RangeError);
    expect(() => new Backoff({ initialMs: 100, maxMs: 50 })).toThrow(RangeError);
    expect(() => new Backoff({ factor: 0.5 })).toThrow(RangeError);
  });
});
