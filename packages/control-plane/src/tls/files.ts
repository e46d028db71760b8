import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

/** Replaces `file` whole (temp file, then rename): a reader or a crash never sees half a certificate. */
export function writeFileAtomic(file: string, content: string, mode: number): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const temp = join(dirname(file), `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    writeFileSync(temp, content, { mode, flag: "wx" });
    renameSync(temp, file);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}

/** The file's text, or undefined when it does not exist. */
export function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
