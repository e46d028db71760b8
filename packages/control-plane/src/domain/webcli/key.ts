import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const WEBCLI_KEY_FILE = "webcli.key";

// One read per data dir per process: the key is needed on every issue and verify.
const cache = new Map<string, Buffer>();

function readKey(file: string): Buffer {
  const key = Buffer.from(readFileSync(file, "utf8").trim(), "base64");
  if (key.length < 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
  return key;
}

/**
 * The HMAC key of web CLI tokens, created (0600) in the data dir on first use. Its own key,
 * not the secret cipher's: rotating one must not invalidate the other.
 */
export function loadWebCliKey(dataDir: string): Buffer {
  const cached = cache.get(dataDir);
  if (cached) return cached;
  const file = join(dataDir, WEBCLI_KEY_FILE);
  try {
    mkdirSync(dataDir, { recursive: true });
    // "wx": if another process created it first, keep theirs and read it below.
    writeFileSync(file, randomBytes(32).toString("base64"), { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const key = readKey(file);
  cache.set(dataDir, key);
  return key;
}
