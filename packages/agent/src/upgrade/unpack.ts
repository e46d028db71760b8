import { execa } from "execa";

export class UnpackError extends Error {
  override name = "UnpackError";
}

/**
 * Unpacks a gzipped tarball into `dir` with the system's tar. GNU tar already refuses member
 * names with `..` and strips leading `/`; `--no-same-owner` keeps files owned by the agent's
 * user even when it runs as root. The manifest check that follows refuses anything else odd.
 */
export async function unpackTarball(file: string, dir: string, signal?: AbortSignal): Promise<void> {
  try {
    await execa("tar", ["-xzf", file, "-C", dir, "--no-same-owner"], {
      timeout: 120_000,
      stdin: "ignore",
      ...(signal ? { cancelSignal: signal } : {}),
    });
  } catch (err) {
    // tar's first line names the problem ("gzip: stdin: not in gzip format"); the rest is noise.
    const firstLine = (err as { stderr?: string }).stderr?.trim().split("\n")[0];
    throw new UnpackError(`unpacking the package failed: ${firstLine || (err as Error).message}`);
  }
}
