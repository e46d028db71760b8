import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { README, renderReadme } from "../../scripts/settings-readme.ts";

describe("README settings tables", () => {
  it("are the ones the settings schemas render (run `pnpm settings:readme` after changing a setting)", () => {
    const text = readFileSync(README, "utf8");
    expect(text).toBe(renderReadme(text));
  });
});
