import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";

export function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * Writes `file` (.tar.gz) from `entries` of `dir`, and `<file>.sha256` in sha256sum format.
 * Fixed owner and order: the package's content does not depend on who built it.
 */
export function writePackageTarball(dir: string, entries: string[], file: string): string {
  execFileSync("tar", [
    "--sort=name",
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "-czf",
    file,
    "-C",
    dir,
    ...entries,
  ]);
  const digest = sha256(readFileSync(file));
  writeFileSync(`${file}.sha256`, `${digest}  ${basename(file)}\n`);
  return digest;
}
