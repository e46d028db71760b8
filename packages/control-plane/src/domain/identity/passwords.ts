import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from "node:crypto";

/**
 * Password hashing with scrypt, a memory-hard KDF: passwords are low-entropy, so unlike the
 * random bearer secrets of tokens.ts they need a hash that is expensive to brute-force.
 *
 * Stored form (self-describing, so parameters can be raised later without breaking old hashes):
 *   scrypt$<N>$<r>$<p>$<salt base64>$<key base64>
 */
export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

/** ~32 MiB and a few tens of milliseconds per hash: the usual interactive-login setting. */
export const DEFAULT_SCRYPT_PARAMS: ScryptParams = { N: 2 ** 15, r: 8, p: 1 };

const SALT_BYTES = 16;
const KEY_BYTES = 64;
/** Bounds on what a stored hash may ask for, so a corrupt row cannot make us allocate gigabytes. */
const MAX_N = 2 ** 20;
const MAX_R = 32;
const MAX_P = 16;

export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 1024;

/** scrypt needs 128·N·r bytes (plus a little); Node's default cap of 32 MiB is just too small for N=2^15, r=8. */
function scryptOptions({ N, r, p }: ScryptParams): ScryptOptions {
  return { N, r, p, maxmem: 128 * N * r * 2 + 1024 * 1024 };
}

/** Async on purpose: crypto.scrypt runs on the libuv pool and does not block the event loop. */
function derive(password: string, salt: Buffer, params: ScryptParams, keyLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize("NFC"), salt, keyLength, scryptOptions(params), (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, params, KEY_BYTES);
  return ["scrypt", params.N, params.r, params.p, salt.toString("base64"), key.toString("base64")].join("$");
}

interface ParsedHash {
  params: ScryptParams;
  salt: Buffer;
  key: Buffer;
}

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 1 && (n & (n - 1)) === 0;
}

function parseHash(stored: string): ParsedHash | null {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return null;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (!isPowerOfTwo(N) || N > MAX_N) return null;
  if (!Number.isInteger(r) || r < 1 || r > MAX_R || !Number.isInteger(p) || p < 1 || p > MAX_P) return null;
  const salt = Buffer.from(parts[4] ?? "", "base64");
  const key = Buffer.from(parts[5] ?? "", "base64");
  if (salt.length === 0 || key.length === 0) return null;
  return { params: { N, r, p }, salt, key };
}

/** True when `password` matches `stored`. A malformed stored hash never matches (and never throws). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseHash(stored);
  if (!parsed) return false;
  const candidate = await derive(password, parsed.salt, parsed.params, parsed.key.length);
  return timingSafeEqual(candidate, parsed.key);
}

let dummyHash: Promise<string> | undefined;

/**
 * Spends the same time as a real verification when there is no user to check against, so the
 * login's response time does not tell which user names exist.
 */
export async function verifyAgainstNothing(password: string): Promise<false> {
  dummyHash ??= hashPassword("keelson-no-such-user");
  await verifyPassword(password, await dummyHash);
  return false;
}
