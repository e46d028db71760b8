import { describe, expect, it } from "vitest";
import {
  AGENT_FRAME_SCHEMAS,
  type AgentFrame,
  assertNever,
  CloseCode,
  CONTROL_FRAME_SCHEMAS,
  type ControlFrame,
  checkCommandResult,
  closeReason,
  encodeFrame,
  MAX_FRAME_BYTES,
  PROTOCOL_VERSION,
  parseAgentFrame,
  parseControlFrame,
} from "../src/index.ts";
import { sampleFacts, sampleHello } from "./fixtures.ts";

const json = (v: unknown) => JSON.stringify(v);

/** One valid frame of every agent -> control plane type. */
const validAgentFrames: AgentFrame[] = [
  sampleHello(),
  sampleHello({ agentStatus: "updating", agentError: "download failed" }),
  { type: "facts", facts: sampleFacts() },
  { type: "status", agentStatus: "running", agentVersion: "0.2.0" },
  { type: "result", id: "c1", ok: true, result: { at: "2024-01-01T00:00:00.000Z" } },
  { type: "result", id: "c1", ok: false, error: { code: "FAILED", message: "boom" } },
  { type: "token.verify", id: "v1", token: "kpt_x" },
];

/** One valid frame of every control plane -> agent type (and every command). */
const validControlFrames: ControlFrame[] = [
  { type: "welcome", protocolVersion: PROTOCOL_VERSION, hostId: "h", projectId: "p", heartbeatMs: 15000 },
  { type: "command", id: "c1", name: "ping", payload: {}, timeoutMs: 1000 },
  {
    type: "command",
    id: "c2",
    name: "agent.upgrade",
    payload: { name: "keelson-agent", version: "0.2.0", url: "file:///tmp/a.tgz", sha256: "a".repeat(64) },
    timeoutMs: 1000,
  },
  { type: "token.verified", id: "v1", valid: true },
];

describe("agent frame validator", () => {
  it.each(validAgentFrames.map((f) => [f.type, f] as const))("accepts a valid %s frame", (_type, frame) => {
    const parsed = parseAgentFrame(json(frame));
    expect(parsed).toEqual({ ok: true, frame });
  });

  it("accepts Buffer, ArrayBuffer and fragmented input", () => {
    const text = json(validAgentFrames[2]);
    const buf = Buffer.from(text);
    expect(parseAgentFrame(buf).ok).toBe(true);
    expect(parseAgentFrame(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length)).ok).toBe(true);
    expect(parseAgentFrame([buf.subarray(0, 5), buf.subarray(5)]).ok).toBe(true);
  });

  it("refuses an unknown type, a missing type and control-plane frame types", () => {
    for (const raw of [{ type: "nope" }, {}, { type: 7 }, validControlFrames[0], validControlFrames[1]]) {
      const parsed = parseAgentFrame(json(raw));
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.error).toMatchObject({ code: "BAD_FRAME", reason: "unknown-type" });
    }
  });

  it("refuses non-JSON and non-object frames", () => {
    expect(parseAgentFrame("{not json")).toMatchObject({ ok: false, error: { reason: "not-json" } });
    for (const raw of ["[]", "null", "42", '"hello"']) {
      expect(parseAgentFrame(raw)).toMatchObject({ ok: false, error: { reason: "not-object", code: "BAD_FRAME" } });
    }
  });

  it("refuses an oversize frame before parsing it", () => {
    const big = json({ type: "token.verify", id: "v", token: "x".repeat(MAX_FRAME_BYTES) });
    expect(parseAgentFrame(big)).toMatchObject({ ok: false, error: { reason: "oversize", code: "BAD_FRAME" } });
  });

  // Every agent frame type: drop each required field, and give each field a wrong type.
  describe.each(validAgentFrames.map((f) => [`${f.type}${"ok" in f ? `(ok=${f.ok})` : ""}`, f] as const))(
    "%s",
    (_name, frame) => {
      const fields = Object.keys(frame).filter((k) => k !== "type");
      it.each(fields)("refuses it without %s (unless optional)", (field) => {
        const copy: Record<string, unknown> = { ...frame };
        delete copy[field];
        const parsed = parseAgentFrame(json(copy));
        if (field === "agentError") {
          expect(parsed.ok).toBe(true);
          return;
        }
        expect(parsed.ok).toBe(false);
        if (!parsed.ok) {
          expect(parsed.error.reason).toBe("schema");
          expect(parsed.error.message).toContain(field);
        }
      });

      it.each(fields)("refuses it with %s of the wrong type", (field) => {
        const value = (frame as Record<string, unknown>)[field];
        // `result` accepts any JSON value on the wire (its schema is per command, checked later).
        if (field === "result") return;
        const wrong =
          typeof value === "string" ? 12 : typeof value === "number" ? "12" : typeof value === "boolean" ? "true" : "x";
        const parsed = parseAgentFrame(json({ ...frame, [field]: wrong }));
        expect(parsed.ok).toBe(false);
        if (!parsed.ok) expect(parsed.error.message).toContain(`/${field}`);
      });

      it("refuses an unknown extra property", () => {
        const parsed = parseAgentFrame(json({ ...frame, extra: 1 }));
        expect(parsed).toMatchObject({ ok: false, error: { reason: "schema" } });
        if (!parsed.ok) expect(parsed.error.message).toContain("extra");
      });
    },
  );

  it("names the nested field that is wrong", () => {
    const facts = sampleFacts();
    const bad = { ...facts, cpu: { ...facts.cpu, count: 2.5 } };
    const parsed = parseAgentFrame(json({ type: "facts", facts: bad }));
    expect(parsed).toMatchObject({
      ok: false,
      error: { message: "bad facts frame: /facts/cpu/count must be integer" },
    });
  });

  it("explains a bad enum value with the allowed values", () => {
    const parsed = parseAgentFrame(json({ type: "status", agentStatus: "sleeping", agentVersion: "1" }));
    expect(parsed).toMatchObject({ ok: false, error: { message: expect.stringContaining('"running", "updating"') } });
  });

  it("refuses a hello of another protocol version with PROTOCOL_MISMATCH, even if its shape changed", () => {
    const parsed = parseAgentFrame(json({ type: "hello", protocolVersion: PROTOCOL_VERSION + 1, somethingNew: true }));
    expect(parsed).toMatchObject({ ok: false, error: { code: "PROTOCOL_MISMATCH", reason: "version" } });
    if (!parsed.ok) expect(parsed.error.message).toContain(String(PROTOCOL_VERSION + 1));
  });

  it("refuses a string that is not well-formed Unicode however it arrives, and takes an escaped pair", () => {
    const facts = sampleFacts();
    const named = (name: string) =>
      json({ type: "facts", facts: { ...facts, interfaces: [{ name, mac: "", addresses: [] }] } });
    const refused = {
      ok: false,
      error: { message: "bad facts frame: /facts/interfaces[0]/name is not valid Unicode text" },
    };
    // Escaped in the JSON text (as JSON.stringify writes one), in a Buffer or a string.
    expect(named("eth\ud800")).toContain("\\ud800");
    expect(parseAgentFrame(Buffer.from(named("eth\ud800")))).toMatchObject(refused);
    expect(parseAgentFrame(named("eth\udfff"))).toMatchObject(refused);
    // Unescaped in a string frame (no UTF-8 decoder saw it).
    expect(parseAgentFrame(named("eth\ud800").replace("\\ud800", "\ud800"))).toMatchObject(refused);
    // A whole character written as its escaped pair is text like any other.
    expect(parseAgentFrame(named("eth\u{1F600}")).ok).toBe(true);
    expect(parseAgentFrame(named("eth\u{1F600}").replace("\u{1F600}", "\\ud83d\\ude00")).ok).toBe(true);
  });

  it("refuses over-long strings and too many items", () => {
    expect(parseAgentFrame(json(sampleHello({ hostname: "h".repeat(254) }))).ok).toBe(false);
    const interfaces = Array.from({ length: 257 }, (_, i) => ({ name: `e${i}`, mac: "", addresses: [] }));
    expect(parseAgentFrame(json({ type: "facts", facts: sampleFacts({ interfaces }) })).ok).toBe(false);
  });
});

describe("control frame validator", () => {
  it.each(validControlFrames.map((f) => [f.type, f] as const))("accepts a valid %s frame", (_type, frame) => {
    expect(parseControlFrame(encodeFrame(frame))).toEqual({ ok: true, frame });
  });

  it("refuses agent frame types and unknown types", () => {
    for (const raw of [sampleHello(), { type: "result", id: "1", ok: true, result: 1 }, { type: "x" }]) {
      expect(parseControlFrame(json(raw))).toMatchObject({ ok: false, error: { reason: "unknown-type" } });
    }
  });

  it("refuses a command with an unknown name or a payload of another command", () => {
    expect(parseControlFrame(json({ type: "command", id: "1", name: "rm-rf", payload: {}, timeoutMs: 1 })).ok).toBe(
      false,
    );
    const wrongPayload = { type: "command", id: "1", name: "agent.upgrade", payload: {}, timeoutMs: 1 };
    const parsed = parseControlFrame(json(wrongPayload));
    expect(parsed).toMatchObject({ ok: false, error: { reason: "schema" } });
    if (!parsed.ok) expect(parsed.error.message).toMatch(/payload.*missing required name/);
    const badSha = { ...wrongPayload, payload: { name: "a", version: "1", url: "file:///x", sha256: "nothex" } };
    expect(parseControlFrame(json(badSha)).ok).toBe(false);
  });

  it("refuses a welcome of another protocol version with PROTOCOL_MISMATCH", () => {
    const welcome = { ...validControlFrames[0], protocolVersion: PROTOCOL_VERSION + 1 };
    expect(parseControlFrame(json(welcome))).toMatchObject({ ok: false, error: { code: "PROTOCOL_MISMATCH" } });
  });

  it("refuses a non-positive timeout and a missing id", () => {
    expect(parseControlFrame(json({ type: "command", id: "1", name: "ping", payload: {}, timeoutMs: 0 })).ok).toBe(
      false,
    );
    expect(parseControlFrame(json({ type: "command", name: "ping", payload: {}, timeoutMs: 5 })).ok).toBe(false);
  });
});

describe("command results", () => {
  it("checks a result against its command's schema", () => {
    expect(checkCommandResult("ping", { at: "now" })).toBeUndefined();
    expect(checkCommandResult("ping", { at: 1 })).toContain("/at");
    expect(checkCommandResult("agent.upgrade", { accepted: true, status: "updating" })).toBeUndefined();
    expect(checkCommandResult("agent.upgrade", { accepted: true })).toContain("status");
  });
});

describe("schemas and codes", () => {
  it("knows every frame type of its direction, and only those", () => {
    // A known type with no fields is refused by its schema, not as an unknown type.
    for (const type of Object.keys(AGENT_FRAME_SCHEMAS)) {
      expect(parseAgentFrame(json({ type }))).toMatchObject({ ok: false, error: { reason: "schema" } });
      expect(parseControlFrame(json({ type }))).toMatchObject({ ok: false, error: { reason: "unknown-type" } });
    }
    for (const type of Object.keys(CONTROL_FRAME_SCHEMAS)) {
      expect(parseControlFrame(json({ type }))).toMatchObject({ ok: false, error: { reason: "schema" } });
      expect(parseAgentFrame(json({ type }))).toMatchObject({ ok: false, error: { reason: "unknown-type" } });
    }
    for (const frame of validAgentFrames) expect(Object.keys(AGENT_FRAME_SCHEMAS)).toContain(frame.type);
    for (const frame of validControlFrames) expect(Object.keys(CONTROL_FRAME_SCHEMAS)).toContain(frame.type);
  });

  it("uses application close codes in the 4400 range and 1001 for going away", () => {
    expect(CloseCode.GOING_AWAY).toBe(1001);
    for (const name of ["BAD_FRAME", "UNAUTHORIZED", "SUPERSEDED", "PROTOCOL_MISMATCH"] as const) {
      expect(CloseCode[name]).toBeGreaterThanOrEqual(4400);
      expect(CloseCode[name]).toBeLessThan(4500);
    }
    expect(new Set(Object.values(CloseCode)).size).toBe(Object.keys(CloseCode).length);
  });

  it("keeps close reasons within the 123 bytes RFC 6455 allows, without splitting characters", () => {
    expect(closeReason("short")).toBe("short");
    const long = closeReason("é".repeat(200));
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(123);
    expect(long).not.toContain("\uFFFD");
  });

  it("assertNever throws for a value the switch did not handle", () => {
    expect(() => assertNever({ type: "x" } as never)).toThrow(/unhandled frame/);
  });
});
