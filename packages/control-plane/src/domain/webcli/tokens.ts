import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { loadWebCliKey } from "./key.ts";

/**
 * Web CLI session tokens: `kwc1.<payload>.<mac>` (base64url), the payload a JSON claim set and
 * the mac HMAC-SHA256 over `kwc1.<payload>`. Stateless on purpose: the web terminal proxy
 * checks them without a database. They are never stored in the tokens table, so the API's
 * X-Auth-Token check cannot accept one.
 */
export const WEBCLI_TOKEN_VERSION = "kwc1";
export const WEBCLI_TOKEN_TTL_SECONDS = 600;
// A real token is a few hundred bytes; anything much longer is not worth parsing.
const MAX_TOKEN_LENGTH = 4096;

export interface WebCliClaims {
  projectId: string;
  clusterId: string;
  subject: string;
  /** Issued at and expiry, in seconds since the epoch. */
  iat: number;
  exp: number;
  /** Unique id, so a proxy can refuse a replay. */
  jti: string;
}

function mac(key: Buffer, signed: string): Buffer {
  return createHmac("sha256", key).update(signed).digest();
}

export function issueWebCliToken(
  key: Buffer,
  input: { projectId: string; clusterId: string; subject: string; now?: Date; ttlSeconds?: number },
): { token: string; claims: WebCliClaims } {
  const iat = Math.floor((input.now ?? new Date()).getTime() / 1000);
  const claims: WebCliClaims = {
    projectId: input.projectId,
    clusterId: input.clusterId,
    subject: input.subject,
    iat,
    exp: iat + (input.ttlSeconds ?? WEBCLI_TOKEN_TTL_SECONDS),
    jti: randomBytes(16).toString("base64url"),
  };
  const signed = `${WEBCLI_TOKEN_VERSION}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
  return { token: `${signed}.${mac(key, signed).toString("base64url")}`, claims };
}

function isClaims(value: unknown): value is WebCliClaims {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    typeof v.projectId === "string" &&
    typeof v.clusterId === "string" &&
    typeof v.subject === "string" &&
    typeof v.jti === "string" &&
    Number.isInteger(v.iat) &&
    Number.isInteger(v.exp)
  );
}

/**
 * The claims of a genuine, unexpired token; null for anything else (malformed, tampered,
 * signed with another key, expired). Takes the key or the data dir that holds it.
 */
export function verifyWebCliToken(keyOrDataDir: Buffer | string, token: string, now = new Date()): WebCliClaims | null {
  if (token.length > MAX_TOKEN_LENGTH) return null;
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== WEBCLI_TOKEN_VERSION) return null;
  const [version, payload, signature] = parts as [string, string, string];
  const key = typeof keyOrDataDir === "string" ? loadWebCliKey(keyOrDataDir) : keyOrDataDir;
  // Compared as canonical text: base64url decoding ignores stray characters and the unused
  // low bits of the last one, so different strings could decode to the same bytes.
  const expected = Buffer.from(mac(key, `${version}.${payload}`).toString("base64url"));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!isClaims(claims)) return null;
  return claims.exp * 1000 > now.getTime() ? claims : null;
}
