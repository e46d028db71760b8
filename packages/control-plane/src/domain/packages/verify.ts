import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { PackageError } from "@keelson/protocol";

export { sha256File } from "@keelson/protocol";

const run = promisify(execFile);

/** Why an uploaded package is refused; the route turns it into a 400 naming `package`. */
export class PackageRejected extends Error {
  override name = "PackageRejected";
}

/**
 * Unpacks `tarball` into the empty directory `dir` and checks it with `verifyDir`, the same
 * check an agent runs before installing it (packages/protocol/src/package-verify.ts).
 * Checking here means a bad package is refused at upload, not on every host.
 */
export async function verifyPackageTarball<M>(
  tarball: string,
  dir: string,
  verifyDir: (dir: string) => Promise<M>,
): Promise<M> {
  try {
    await run("tar", ["-xzf", tarball, "-C", dir, "--no-same-owner"], { timeout: 120_000 });
  } catch (err) {
    const firstLine = String((err as { stderr?: string }).stderr ?? "")
      .trim()
      .split("\n")[0];
    throw new PackageRejected(`not a gzipped tarball: ${firstLine || (err as Error).message}`);
  }
  try {
    return await verifyDir(dir);
  } catch (err) {
    if (err instanceof PackageError) throw new PackageRejected(err.message);
    throw err;
  }
}
