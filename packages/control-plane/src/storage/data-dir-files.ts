import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { DataDirFullError, isNoSpace } from "@keelson/db";

/**
 * Runs a write of a data-dir file, turning "no space" (ENOSPC, EDQUOT) into DataDirFullError:
 * the error storageFull recognises, so the request answers 507 naming the data dir. Only the
 * data dir's own writes go through here; an ENOSPC from elsewhere stays what it is.
 */
export function writingDataDir<T>(path: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    if (isNoSpace(err)) throw new DataDirFullError(path, err);
    throw err;
  }
}

/** writingDataDir for an asynchronous write. */
export async function writingDataDirAsync<T>(path: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isNoSpace(err)) throw new DataDirFullError(path, err);
    throw err;
  }
}

/**
 * Replaces a data-dir file whole: a temporary file beside it, synced, then renamed over it, so a
 * reader or a crash sees the old content or the new, never half (certificates, keys, the admin
 * token). No space is DataDirFullError, with the temporary file gone.
 */
export function writeFileAtomic(file: string, content: string, mode: number): void {
  writingDataDir(file, () => {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    const temp = join(dirname(file), `.${randomBytes(6).toString("hex")}.tmp`);
    try {
      const fd = openSync(temp, "wx", mode);
      try {
        writeSync(fd, content);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(temp, file);
    } finally {
      rmSync(temp, { force: true });
    }
  });
}

/** A data-dir file's text, or undefined when there is no such file. */
export function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
