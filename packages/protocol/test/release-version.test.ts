import { describe, expect, it } from "vitest";
import { compareVersions } from "../src/release-version.ts";

describe("compareVersions", () => {
  it.each([
    ["0.10.0", "0.9.3", 1],
    ["1.0.0", "1.0", 0],
    ["1.2.3", "1.2.3", 0],
    ["1.2.3-rc.1", "1.2.3", -1],
    ["1.2.3-rc.2", "1.2.3-rc.10", -1],
    ["1.2.3-beta", "1.2.3-alpha.9", 1],
    ["1.2.3-rc", "1.2.3-rc.1", -1],
    ["2.0.0", "10.0.0", -1],
    ["1.0.0-rc-2", "1.0.0-rc-10", 1],
    ["1.0.0-rc-1", "1.0.0-rc", 1],
  ])("%s vs %s is %i", (a, b, expected) => {
    expect(compareVersions(a, b)).toBe(expected);
  });
});
