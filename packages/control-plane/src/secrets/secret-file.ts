import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * Reads a secret file of the data dir, creating it (mode 0600) with `create()`'s content the
 * first time. The content is written to a temporary file and then linked into place, so a
 * crash never leaves an empty or half-written secret, and when two processes race the first
 * link wins and both read the same content.
 */
export function readOrCreateSecretFile(file: string, create: () => string): string {
  mkdirSync(dirname(file), { recursive: true });
  const temp = join(dirname(file), `.${randomBytes(6).toString("hex")}.tmp`);
  writeFileSync(temp, create(), { mode: 0o600, flag: "wx" });
  try {
    linkSync(temp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    unlinkSync(temp);
  }
  return readFileSync(file, "utf8");
}
