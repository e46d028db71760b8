import { type Static, Type } from "typebox";
import { Compile } from "typebox/compile";

/**
 * The web CLI's WebSocket protocol (`GET /v1/webcli/session`, README "Web CLI"). Every frame is
 * one JSON text message; each side's frames are checked against these schemas both ways, as the
 * agent link's are (@keelson/protocol): a client frame that does not match ends the session
 * with an `error` frame naming what was wrong, and the server cannot send one that does not.
 */
export const WEBCLI_PATH = "/v1/webcli/session";
/** A frame larger than this is refused before parsing. */
export const MAX_CLIENT_FRAME_BYTES = 16 * 1024;

const strict = { additionalProperties: false } as const;
const Dimension = Type.Integer({ minimum: 1, maximum: 10_000 });

export const ClientFrame = Type.Union([
  Type.Object({ type: Type.Literal("auth"), token: Type.String({ minLength: 1, maxLength: 4096 }) }, strict),
  Type.Object({ type: Type.Literal("input"), data: Type.String({ maxLength: 8192 }) }, strict),
  Type.Object({ type: Type.Literal("resize"), cols: Dimension, rows: Dimension }, strict),
]);
export type ClientFrame = Static<typeof ClientFrame>;

export const ServerFrame = Type.Union([
  Type.Object({ type: Type.Literal("ready"), cluster: Type.String({ minLength: 1 }) }, strict),
  Type.Object(
    {
      type: Type.Literal("output"),
      stream: Type.Union([Type.Literal("stdout"), Type.Literal("stderr")]),
      data: Type.String(),
    },
    strict,
  ),
  Type.Object({ type: Type.Literal("exit"), code: Type.Integer() }, strict),
  Type.Object(
    {
      type: Type.Literal("error"),
      code: Type.String({ pattern: "^[a-z_]+$" }),
      message: Type.String({ minLength: 1 }),
    },
    strict,
  ),
]);
export type ServerFrame = Static<typeof ServerFrame>;

const clientValidator = Compile(ClientFrame);
const serverValidator = Compile(ServerFrame);

export type ClientParse = { ok: true; frame: ClientFrame } | { ok: false; message: string };

/** A client frame, or why it is refused (in words the terminal can show). */
export function parseClientFrame(data: Buffer, isBinary: boolean): ClientParse {
  if (isBinary) return { ok: false, message: "frames are JSON text messages, not binary" };
  if (data.length > MAX_CLIENT_FRAME_BYTES) {
    return { ok: false, message: `a frame of ${data.length} bytes exceeds the limit of ${MAX_CLIENT_FRAME_BYTES}` };
  }
  let value: unknown;
  try {
    value = JSON.parse(data.toString("utf8"));
  } catch {
    return { ok: false, message: "a frame is not valid JSON" };
  }
  if (clientValidator.Check(value)) return { ok: true, frame: value };
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof type !== "string" || !["auth", "input", "resize"].includes(type)) {
    return { ok: false, message: `unknown frame type ${JSON.stringify(type)}: expected auth, input or resize` };
  }
  const first = clientValidator.Errors(value)[0];
  return {
    ok: false,
    message: `bad ${type} frame: ${first ? `${first.instancePath || "/"} ${first.message}` : "does not match"}`,
  };
}

/** The one way a frame leaves the server: checked, so a bug cannot send what the client would refuse. */
export function encodeServerFrame(frame: ServerFrame): string {
  if (!serverValidator.Check(frame))
    throw new Error(`refusing to send a web CLI frame that breaks its schema: ${JSON.stringify(frame).slice(0, 200)}`);
  return JSON.stringify(frame);
}
