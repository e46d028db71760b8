import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { readIfExists, writingDataDir } from "../storage/data-dir-files.ts";

/**
 * Reads a secret file of the data dir, creating it (mode 0600) with `create()`'s content the
 * first time. An existing file is only read: a start on a full disk must not need to write.
 * A new one is written to a temporary file and then linked into place, so a crash never
 * leaves an empty or half-written secret, and when two processes race the first link wins and
 * both read the same content. A full disk while creating raises DataDirFullError, with the
 * temporary file gone.
 */
export function readOrCreateSecretFile(file: string, create: () => string): string {
  const existing = readIfExists(file);
  if (existing !== undefined) return existing;
  const temp = join(dirname(file), `.${randomBytes(6).toString("hex")}.tmp`);
  writingDataDir(file, () => {
    mkdirSync(dirname(file), { recursive: true });
    try {
      writeFileSync(temp, create(), { mode: 0o600, flag: "wx" });
      linkSync(temp, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      rmSync(temp, { force: true });
    }
  });
  return readFileSync(file, "utf8");
}
