import { join } from "node:path";
import { newKeyText } from "../../secrets/cipher.ts";
import { readOrCreateSecretFile } from "../../secrets/secret-file.ts";

export const WEBCLI_KEY_FILE = "webcli.key";

// One read per data dir per process: the key is needed on every issue and verify.
const cache = new Map<string, Buffer>();

/** The key kept as base64 text in `where` (a file, or the database's copy). */
export function parseWebCliKey(where: string, text: string): Buffer {
  const key = Buffer.from(text.trim(), "base64");
  if (key.length < 32) throw new Error(`${where} does not hold a 32-byte base64 key`);
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
  const key = parseWebCliKey(file, readOrCreateSecretFile(file, newKeyText));
  cache.set(dataDir, key);
  return key;
}
