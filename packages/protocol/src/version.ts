/**
 * Version of the agent <-> control-plane wire protocol. Both sides send it (the agent in
 * `hello`, the control plane in `welcome`); any difference closes the link with
 * PROTOCOL_MISMATCH, because frames of another version cannot be trusted to mean the same.
 * Bump it on every incompatible change to frames.ts or commands.ts.
 */
export const PROTOCOL_VERSION = 1;

/** The WebSocket path of the agent hub on the control plane's listener. */
export const AGENT_LINK_PATH = "/v1/agents/link";

/** Largest frame either side accepts, in bytes; anything bigger is a bad frame. */
export const MAX_FRAME_BYTES = 1024 * 1024;

/** Default heartbeat interval; the control plane announces the effective one in `welcome`. */
export const DEFAULT_HEARTBEAT_MS = 15_000;
