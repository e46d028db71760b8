import { randomBytes } from "node:crypto";
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";

/** Told of every atomic write refused for want of space (ENOSPC, EDQUOT), with the file's path. */
type NoSpaceListener = (path: string, err: NodeJS.ErrnoException) => void;
const noSpaceListeners = new Set<NoSpaceListener>();

/** Hears of writes refused for want of space (the state dir's watch, state-space.ts); returns the unsubscribe. */
export function onNoSpace(listener: NoSpaceListener): () => void {
  noSpaceListeners.add(listener);
  return () => noSpaceListeners.delete(listener);
}

/** The errno codes of a write refused for want of space: the disk full, or the quota spent. */
export function isNoSpace(err: unknown): err is NodeJS.ErrnoException {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOSPC" || code === "EDQUOT";
}

/**
 * Writes by temp file + fsync + rename in the same directory, so a reader (or a crash) sees the
 * old content or the new, never half of either. A write that fails (a full disk above all)
 * removes its temp file and leaves the old content in place; no-space failures are also told
 * to onNoSpace's listeners before the error is thrown.
 */
export function writeFileAtomic(
  path: string,
  content: string | Buffer,
  mode = 0o644,
  options: { dirMode?: number } = {},
): void {
  const temp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    mkdirSync(dirname(path), { recursive: true, ...(options.dirMode ? { mode: options.dirMode } : {}) });
    const fd = openSync(temp, "w", mode);
    try {
      writeSync(fd, typeof content === "string" ? Buffer.from(content) : content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    // openSync's mode is filtered by the umask; the file must be exactly `mode`.
    chmodSync(temp, mode);
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    if (isNoSpace(err)) for (const listener of noSpaceListeners) listener(path, err);
    throw err;
  }
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
