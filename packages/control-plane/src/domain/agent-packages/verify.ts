import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { AgentPackageError, type AgentPackageManifest, verifyAgentPackageDir } from "@keelson/protocol";

export { sha256File } from "@keelson/protocol";

const run = promisify(execFile);

/** Why an uploaded package is refused; the route turns it into a 400 naming `package`. */
export class PackageRejected extends Error {
  override name = "PackageRejected";
}

/**
 * Unpacks `tarball` into the empty directory `dir` and checks it the way the agent will before
 * installing it (docs/agent-package.md "What the agent checks", step 4): the manifest schema,
 * every listed file present with its sha256, nothing unlisted, no symlinks, the entry among the
 * files. Checking here means a bad package is refused at upload, not on every host.
 */
export async function verifyPackageTarball(tarball: string, dir: string): Promise<AgentPackageManifest> {
  try {
    await run("tar", ["-xzf", tarball, "-C", dir, "--no-same-owner"], { timeout: 120_000 });
  } catch (err) {
    const firstLine = String((err as { stderr?: string }).stderr ?? "")
      .trim()
      .split("\n")[0];
    throw new PackageRejected(`not a gzipped tarball: ${firstLine || (err as Error).message}`);
  }
  try {
    return await verifyAgentPackageDir(dir);
  } catch (err) {
    if (err instanceof AgentPackageError) throw new PackageRejected(err.message);
    throw err;
  }
}
