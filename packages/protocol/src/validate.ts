import type { TSchema } from "typebox";
import { Compile, type Validator } from "typebox/compile";
import Value from "typebox/value";
import { type CommandName, Commands } from "./commands.ts";
import {
  AGENT_FRAME_SCHEMAS,
  AgentFrame,
  CONTROL_FRAME_SCHEMAS,
  ControlFrame,
  type AgentFrame as TAgentFrame,
  type ControlFrame as TControlFrame,
} from "./frames.ts";
import { malformedStringAt, mayParseMalformed } from "./text.ts";
import { MAX_FRAME_BYTES, PROTOCOL_VERSION } from "./version.ts";

/** A WebSocket message as `ws` hands it over, or a string. */
export type RawFrame = string | Buffer | ArrayBuffer | Buffer[];

export type FrameErrorReason = "oversize" | "not-json" | "not-object" | "unknown-type" | "schema" | "version";

export interface FrameError {
  /** Which close code the receiver should use. */
  code: "BAD_FRAME" | "PROTOCOL_MISMATCH";
  reason: FrameErrorReason;
  /** Human-readable; short enough to serve as a close reason after closeReason(). */
  message: string;
}

export type ParseResult<T> = { ok: true; frame: T } | { ok: false; error: FrameError };

// One compiled validator per direction. Compiling once at import keeps per-frame cost to a
// generated function call, which matters with thousands of agents on one control plane.
const agentValidator = Compile(AgentFrame);
const controlValidator = Compile(ControlFrame);
const resultValidators = Object.fromEntries(
  Object.entries(Commands).map(([name, c]) => [name, Compile(c.result)]),
) as unknown as Record<CommandName, Validator>;

export function parseAgentFrame(raw: RawFrame): ParseResult<TAgentFrame> {
  return parse(raw, agentValidator, AGENT_FRAME_SCHEMAS, "hello");
}

export function parseControlFrame(raw: RawFrame): ParseResult<TControlFrame> {
  return parse(raw, controlValidator, CONTROL_FRAME_SCHEMAS, "welcome");
}

/**
 * A command frame whose name this build does not know (a newer control plane's): its id and
 * name, so the receiver can answer UNKNOWN_COMMAND instead of dropping the link over it.
 * Undefined for anything else, including commands with a known name (those are judged by the
 * schema).
 */
export function unknownCommandOf(raw: RawFrame): { id: string; name: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(typeof raw === "string" ? raw : Buffer.from(raw as Buffer).toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const { type, id, name } = value as { type?: unknown; id?: unknown; name?: unknown };
  if (type !== "command" || typeof id !== "string" || typeof name !== "string") return undefined;
  if (id.length === 0 || id.length > 128 || name.length > 128) return undefined;
  return Object.hasOwn(Commands, name) ? undefined : { id, name };
}

let checkOutgoing = true;

/**
 * Outgoing frames are checked against the same schemas as incoming ones, so a side cannot send
 * what the other will refuse: the sender's own tests find the bug, not a dropped link in
 * production. On by default; the binaries turn it off when NODE_ENV is production, where it
 * would cost one more schema check per frame sent (figures in validate.test.ts).
 */
export function setOutgoingFrameChecks(enabled: boolean): void {
  checkOutgoing = enabled;
}

export class OutgoingFrameError extends Error {
  override name = "OutgoingFrameError";
}

/**
 * The one way a frame leaves either side. The compiler already keeps each side to its own
 * frame types; this checks what types cannot say (lengths, patterns, integers, well-formed
 * text) and throws OutgoingFrameError for a frame the peer would refuse.
 */
export function encodeFrame(frame: TAgentFrame | TControlFrame): string {
  const text = JSON.stringify(frame);
  if (!checkOutgoing) return text;
  const control = parseControlFrame(text);
  if (control.ok) return text;
  const agent = parseAgentFrame(text);
  if (agent.ok) return text;
  const error = control.error.reason === "unknown-type" ? agent.error : control.error;
  throw new OutgoingFrameError(`refusing to send a frame the peer would refuse: ${error.message}`);
}

/** Checks a successful command's result against that command's result schema. */
export function checkCommandResult(name: CommandName, value: unknown): string | undefined {
  const validator = resultValidators[name];
  if (validator.Check(value)) return undefined;
  return describe(Value.Errors(validator.Type(), value));
}

function parse<T>(
  raw: RawFrame,
  validator: Validator,
  variants: Readonly<Record<string, TSchema>>,
  versionedType: string,
): ParseResult<T> {
  const size = byteLength(raw);
  if (size > MAX_FRAME_BYTES) {
    return fail("oversize", `frame of ${size} bytes exceeds the limit of ${MAX_FRAME_BYTES}`);
  }
  let value: unknown;
  const text = toText(raw);
  try {
    value = JSON.parse(text);
  } catch {
    return fail("not-json", "frame is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail("not-object", "frame must be a JSON object");
  }
  const type = (value as { type?: unknown }).type;
  if (typeof type !== "string" || !Object.hasOwn(variants, type)) {
    return fail("unknown-type", `unknown frame type ${JSON.stringify(type ?? null).slice(0, 64)}`);
  }
  // Checked before the schema: a peer of another version may send a hello we cannot parse,
  // and it deserves "upgrade one side", not "bad frame".
  const version = (value as { protocolVersion?: unknown }).protocolVersion;
  if (type === versionedType && typeof version === "number" && version !== PROTOCOL_VERSION) {
    return {
      ok: false,
      error: {
        code: "PROTOCOL_MISMATCH",
        reason: "version",
        message: `protocol version ${version} is not supported; this side speaks ${PROTOCOL_VERSION}`,
      },
    };
  }
  if (validator.Check(value)) {
    const malformed = mayParseMalformed(text) ? malformedStringAt(value) : undefined;
    if (malformed === undefined) return { ok: true, frame: value as T };
    return fail("schema", `bad ${type} frame: /${malformed.replaceAll(".", "/")} is not valid Unicode text`);
  }
  return fail(
    "schema",
    `bad ${type} frame: ${explainUnion(variants[type] as TSchema, value as Record<string, unknown>)}`,
  );
}

/**
 * For a union of frame variants (result ok/failed, one command per name), explains the refusal
 * against the variant whose literal fields match the value, so the message is about the frame
 * the peer meant; when no variant's literals match, names the literal field that is wrong.
 */
function explainUnion(schema: TSchema, value: Record<string, unknown>): string {
  const variants = (schema as { anyOf?: TSchema[] }).anyOf;
  if (!variants) return describe(Value.Errors(schema, value));
  const literals = (variant: TSchema) =>
    Object.entries((variant as { properties?: Record<string, { const?: unknown }> }).properties ?? {}).filter(
      ([, p]) => "const" in p,
    ) as [string, { const: unknown }][];
  const matching = variants.filter((variant) => literals(variant).every(([key, p]) => value[key] === p.const));
  if (matching.length === 1) return describe(Value.Errors(matching[0] as TSchema, value));
  if (matching.length === 0) {
    const allowed = new Map<string, unknown[]>();
    for (const variant of variants) {
      for (const [key, p] of literals(variant)) allowed.set(key, [...(allowed.get(key) ?? []), p.const]);
    }
    for (const [key, values] of allowed) {
      if (!values.includes(value[key])) {
        return `/${key} must be one of ${[...new Set(values)].map((v) => JSON.stringify(v)).join(", ")}`;
      }
    }
  }
  return describe(Value.Errors(schema, value));
}

function fail(reason: FrameErrorReason, message: string): { ok: false; error: FrameError } {
  return { ok: false, error: { code: "BAD_FRAME", reason, message } };
}

/** The first, most specific error, as "<path> <rule>" (e.g. "/facts/cpu/count must be integer"). */
function describe(
  errors: readonly { instancePath: string; message: string; keyword: string; params: object }[],
): string {
  // typebox reports `additionalProperties: false` twice; keep the one that names the property.
  const useful = errors.filter((e) => e.keyword !== "boolean");
  const first = useful.find((e) => e.keyword !== "anyOf") ?? useful[0] ?? errors[0];
  if (!first) return "invalid";
  const path = first.instancePath || "/";
  if (first.keyword === "const") {
    const allowed = useful
      .filter((e) => e.keyword === "const" && e.instancePath === first.instancePath)
      .map((e) => JSON.stringify((e.params as { allowedValue?: unknown }).allowedValue));
    return `${path} must be ${allowed.length > 1 ? `one of ${allowed.join(", ")}` : allowed[0]}`;
  }
  if (first.keyword === "additionalProperties") {
    const names = (first.params as { additionalProperties?: string[] }).additionalProperties ?? [];
    return `${path} has unknown properties ${names.join(", ")}`;
  }
  if (first.keyword === "required") {
    const names = (first.params as { requiredProperties?: string[] }).requiredProperties ?? [];
    return `${path} is missing required ${names.join(", ") || "properties"}`;
  }
  return `${path} ${first.message}`;
}

function byteLength(raw: RawFrame): number {
  if (typeof raw === "string") return Buffer.byteLength(raw, "utf8");
  if (Array.isArray(raw)) return raw.reduce((n, b) => n + b.length, 0);
  return raw.byteLength;
}

function toText(raw: RawFrame): string {
  if (typeof raw === "string") return raw;
  if (Array.isArray(raw)) return Buffer.concat(raw).toString("utf8");
  if (raw instanceof ArrayBuffer) return Buffer.from(raw).toString("utf8");
  return raw.toString("utf8");
}
