import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, relative, sep } from "node:path";
import { promisify } from "node:util";
import { AGENT_MANIFEST_FILE, AgentPackageManifest } from "@keelson/protocol";
import { Compile } from "typebox/compile";

const run = promisify(execFile);
const manifestValidator = Compile(AgentPackageManifest);

/** Why an uploaded package is refused; the route turns it into a 400 naming `package`. */
export class PackageRejected extends Error {
  override name = "PackageRejected";
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
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
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, AGENT_MANIFEST_FILE), "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PackageRejected(
      code === "ENOENT" ? `the package has no ${AGENT_MANIFEST_FILE}` : `${AGENT_MANIFEST_FILE} is not valid JSON`,
    );
  }
  if (!manifestValidator.Check(raw)) {
    const first = manifestValidator.Errors(raw)[0];
    const where = first?.instancePath ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "manifest";
    throw new PackageRejected(`${AGENT_MANIFEST_FILE}: ${where} ${first?.message ?? "is invalid"}`);
  }
  const manifest = raw;
  for (const path of Object.keys(manifest.files)) {
    const norm = normalize(path);
    if (isAbsolute(path) || path.includes("\\") || norm !== path || norm.split(sep).includes("..")) {
      throw new PackageRejected(`${AGENT_MANIFEST_FILE}: file path "${path}" leaves the package`);
    }
  }
  if (!Object.hasOwn(manifest.files, manifest.entry)) {
    throw new PackageRejected(`${AGENT_MANIFEST_FILE}: entry "${manifest.entry}" is not one of the package's files`);
  }
  const present = await regularFiles(dir);
  for (const path of present) {
    if (path !== AGENT_MANIFEST_FILE && !Object.hasOwn(manifest.files, path)) {
      throw new PackageRejected(`the package holds "${path}", which ${AGENT_MANIFEST_FILE} does not list`);
    }
  }
  for (const [path, expected] of Object.entries(manifest.files)) {
    if (!present.has(path)) throw new PackageRejected(`"${path}" is listed in ${AGENT_MANIFEST_FILE} but missing`);
    if ((await sha256File(join(dir, path))) !== expected) {
      throw new PackageRejected(`"${path}" does not match its sha256 in ${AGENT_MANIFEST_FILE}`);
    }
  }
  return manifest;
}

async function regularFiles(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      const full = join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) out.add(relative(dir, full).split(sep).join("/"));
      else {
        const kind = (await lstat(full)).isSymbolicLink() ? "a symlink" : "not a regular file";
        throw new PackageRejected(`"${relative(dir, full)}" in the package is ${kind}`);
      }
    }
  };
  await walk(dir);
  return out;
}
