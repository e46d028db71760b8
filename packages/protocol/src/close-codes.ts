/**
 * WebSocket close codes of the agent link. 44xx are application codes (4000-4999 are free for
 * applications in RFC 6455) chosen to echo the matching HTTP status, so logs read naturally.
 */
export const CloseCode = {
  /** RFC 6455 "going away": the peer is shutting down or restarting; reconnect later. */
  GOING_AWAY: 1001,
  /** A frame failed validation (not JSON, unknown type, missing or mistyped field, oversize). */
  BAD_FRAME: 4400,
  /** The host credential is unknown, or the hello names another host. Do not retry. */
  UNAUTHORIZED: 4401,
  /** No hello arrived in time after the connection opened. */
  HELLO_TIMEOUT: 4408,
  /** A newer connection of the same host replaced this one. */
  SUPERSEDED: 4409,
  /** The peers speak different PROTOCOL_VERSIONs. Do not retry: one side must be upgraded. */
  PROTOCOL_MISMATCH: 4426,
} as const;

export type CloseCodeName = keyof typeof CloseCode;
export type CloseCodeValue = (typeof CloseCode)[CloseCodeName];

/** Closes after which an agent must stop retrying: a retry cannot succeed without a human. */
export const FATAL_CLOSE_CODES: ReadonlySet<number> = new Set([CloseCode.UNAUTHORIZED, CloseCode.PROTOCOL_MISMATCH]);

export function closeCodeName(code: number): string {
  for (const [name, value] of Object.entries(CloseCode)) if (value === code) return name;
  return String(code);
}

/**
 * Close reasons are limited to 123 bytes of UTF-8 by RFC 6455; `ws` throws on longer ones, so
 * every close goes through this.
 */
export function closeReason(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= 123) return text;
  let cut = 120;
  // Do not split a multi-byte character: back up to a character boundary.
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return `${bytes.subarray(0, cut).toString("utf8")}...`;
}
