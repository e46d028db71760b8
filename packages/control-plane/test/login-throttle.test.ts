import { describe, expect, it } from "vitest";
import { LoginThrottle } from "../src/domain/identity/login-throttle.ts";

describe("LoginThrottle", () => {
  it("blocks a user from an address at the limit until the window of the first failure ends", () => {
    const throttle = new LoginThrottle({ perUser: 3, perAddress: 100, windowMs: 1000 });
    for (let i = 0; i < 3; i++) {
      expect(throttle.blockedFor("10.0.0.1", "p/alice", 100)).toBe(0);
      throttle.failed("10.0.0.1", "p/alice", 100 + i);
    }
    expect(throttle.blockedFor("10.0.0.1", "p/alice", 500)).toBe(600);
    // Another address, or another user, is not blocked; case does not make another user.
    expect(throttle.blockedFor("10.0.0.2", "p/alice", 500)).toBe(0);
    expect(throttle.blockedFor("10.0.0.1", "p/bob", 500)).toBe(0);
    expect(throttle.blockedFor("10.0.0.1", "p/ALICE", 500)).toBe(600);
    expect(throttle.blockedFor("10.0.0.1", "p/alice", 1100)).toBe(0);
    // A new window starts from scratch.
    throttle.failed("10.0.0.1", "p/alice", 1200);
    expect(throttle.blockedFor("10.0.0.1", "p/alice", 1200)).toBe(0);
  });

  it("blocks an address that tries many users", () => {
    const throttle = new LoginThrottle({ perUser: 100, perAddress: 5, windowMs: 1000 });
    for (let i = 0; i < 5; i++) throttle.failed("10.0.0.9", `p/user-${i}`, 0);
    expect(throttle.blockedFor("10.0.0.9", "p/someone-else", 10)).toBe(990);
    expect(throttle.blockedFor("10.0.0.8", "p/someone-else", 10)).toBe(0);
  });

  it("keeps at most maxKeys counts, forgetting the oldest", () => {
    const throttle = new LoginThrottle({ perUser: 1, perAddress: 1000, windowMs: 10_000, maxKeys: 4 });
    throttle.failed("10.0.0.1", "p/a", 0);
    expect(throttle.blockedFor("10.0.0.1", "p/a", 1)).toBeGreaterThan(0);
    for (let i = 0; i < 4; i++) throttle.failed(`10.0.1.${i}`, "p/x", 2 + i);
    expect(throttle.blockedFor("10.0.0.1", "p/a", 10)).toBe(0);
  });
});
