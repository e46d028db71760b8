import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Writes by temp file + fsync + rename in the same directory, so a reader (or a crash) sees the
 * old content or the new, never half of either.
 */
export function writeFileAtomic(path: string, content: string | Buffer, mode = 0o644): void {
  mkdirSync(dirname(path), { recursive: true });
  const temp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const fd = openSync(temp, "w", mode);
  try {
    writeSync(fd, typeof content === "string" ? Buffer.from(content) : content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(temp, mode);
  renameSync(temp, path);
}

/** Writes only when the content differs; returns whether it wrote. */
export function writeFileIfChanged(path: string, content: string, mode = 0o644): boolean {
  if (readTextOrUndefined(path) === content) {
    chmodSync(path, mode);
    return false;
  }
  writeFileAtomic(path, content, mode);
  return true;
}

export function readTextOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
