import { describe, expect, it } from "vitest";
import { parseVrouterId, VROUTER_ID_MAX, VROUTER_ID_MIN, vrrpRouterId } from "../src/index.ts";

describe("keepalived virtual router id", () => {
  it("maps every API value (0-254) into VRRP's range (1-255), one to one", () => {
    const mapped = new Set<number>();
    for (let id = VROUTER_ID_MIN; id <= VROUTER_ID_MAX; id++) {
      const vrid = vrrpRouterId(id);
      expect(vrid).toBeGreaterThanOrEqual(1);
      expect(vrid).toBeLessThanOrEqual(255);
      mapped.add(vrid);
    }
    expect(mapped.size).toBe(255);
    // The first cluster with a VIP gets API id 0: keepalived refuses VRID 0.
    expect(vrrpRouterId(0)).toBe(1);
    expect(vrrpRouterId(254)).toBe(255);
    expect(() => vrrpRouterId(255)).toThrow(RangeError);
    expect(() => vrrpRouterId(-1)).toThrow(RangeError);
  });

  it("parses the API's decimal string strictly", () => {
    expect(parseVrouterId("0")).toBe(0);
    expect(parseVrouterId("254")).toBe(254);
    for (const bad of [undefined, "", "255", "-1", "1.5", "01", " 1", "x"])
      expect(parseVrouterId(bad), bad).toBeUndefined();
  });
});
