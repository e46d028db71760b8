import { describe, expect, it } from "vitest";
import { type NodeReportFrame, parseAgentFrame } from "../src/index.ts";

const base: NodeReportFrame = {
  type: "node.report",
  clusterId: "c1",
  report: { status: "ok", phases: [] },
  apiResponding: true,
};

describe("node.report etcd member health", () => {
  it("is optional: a report without it (a worker, an older agent) is valid", () => {
    expect(parseAgentFrame(JSON.stringify(base))).toEqual({ ok: true, frame: base });
  });

  it("accepts members, healthy and checkedAt", () => {
    const frame = { ...base, etcd: { members: 3, healthy: 2, checkedAt: "2026-01-01T00:00:00.000Z" } };
    expect(parseAgentFrame(JSON.stringify(frame))).toEqual({ ok: true, frame });
  });

  it.each([
    ["a negative count", { members: -1, healthy: 0, checkedAt: "x" }],
    ["a fraction", { members: 3, healthy: 1.5, checkedAt: "x" }],
    ["a missing checkedAt", { members: 3, healthy: 3 }],
    ["an unknown field", { members: 3, healthy: 3, checkedAt: "x", leader: "m1" }],
  ])("refuses %s", (_what, etcd) => {
    const parsed = parseAgentFrame(JSON.stringify({ ...base, etcd }));
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error.message).toMatch(/etcd/);
  });
});
