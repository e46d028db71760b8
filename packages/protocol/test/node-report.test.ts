import { describe, expect, it } from "vitest";
import { type NodeReportFrame, PROTOCOL_VERSION, parseAgentFrame, parseControlFrame } from "../src/index.ts";

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

describe("node.report command", () => {
  it("is optional, and names a command id", () => {
    const frame = { ...base, command: "op-1:node-1:node.restart" };
    expect(parseAgentFrame(JSON.stringify(frame))).toEqual({ ok: true, frame });
  });

  it.each([
    ["an empty id", ""],
    ["an id over 128 characters", "x".repeat(129)],
    ["a number", 7],
  ])("refuses %s", (_what, command) => {
    const parsed = parseAgentFrame(JSON.stringify({ ...base, command }));
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error.message).toMatch(/command/);
  });
});

describe("welcome capabilities", () => {
  const welcome = { type: "welcome", protocolVersion: PROTOCOL_VERSION, hostId: "h1", projectId: "p1", heartbeatMs: 1 };

  it("are optional, a list of names", () => {
    expect(parseControlFrame(JSON.stringify(welcome)).ok).toBe(true);
    const announced = { ...welcome, capabilities: ["node-report-command"] };
    expect(parseControlFrame(JSON.stringify(announced))).toEqual({ ok: true, frame: announced });
  });

  it("refuses a list that is not of names", () => {
    const parsed = parseControlFrame(JSON.stringify({ ...welcome, capabilities: "node-report-command" }));
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error.message).toMatch(/capabilities/);
  });
});
