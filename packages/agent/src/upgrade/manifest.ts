import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, relative, sep } from "node:path";
import { AgentPackageManifest, AGENT_MANIFEST_FILE as MANIFEST_FILE } from "@keelson/protocol";
import { Compile } from "typebox/compile";

/**
 * The agent package format (docs/agent-package.md): a gzipped tarball whose root holds
 * `manifest.json` and the files it lists. The manifest names the package, its version, the
 * entry file the launcher runs with node, and the sha256 of every other file, so a package is
 * checked file by file after unpacking and not only as a whole.
 */
export {
  AGENT_MANIFEST_FILE as MANIFEST_FILE,
  AGENT_MANIFEST_FORMAT as MANIFEST_FORMAT,
  AGENT_PACKAGE_NAME as PACKAGE_NAME,
} from "@keelson/protocol";
/** The schema lives in packages/protocol: the control plane verifies uploaded packages with it too. */
export const PackageManifest = AgentPackageManifest;
export type PackageManifest = AgentPackageManifest;

const manifestValidator = Compile(PackageManifest);

export class ManifestError extends Error {
  override name = "ManifestError";
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** A manifest path must stay inside the package: relative, normalised, no `..`. */
function safeRelative(path: string): boolean {
  if (isAbsolute(path) || path.includes("\\")) return false;
  const norm = normalize(path);
  return norm === path && !norm.split(sep).includes("..") && norm !== ".";
}

/**
 * Reads and checks the manifest of an unpacked package in `dir`: the schema, the expected
 * version, every listed file present with its hash, no unlisted file, and the entry among them.
 */
export async function verifyPackageDir(dir: string, expectedVersion?: string): Promise<PackageManifest> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ManifestError(
      code === "ENOENT" ? `the package has no ${MANIFEST_FILE}` : `${MANIFEST_FILE} is not valid JSON`,
    );
  }
  if (!manifestValidator.Check(raw)) {
    const first = manifestValidator.Errors(raw)[0];
    const where = first?.instancePath ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "manifest";
    throw new ManifestError(`${MANIFEST_FILE}: ${where} ${first?.message ?? "is invalid"}`);
  }
  const manifest = raw;
  if (expectedVersion !== undefined && manifest.version !== expectedVersion) {
    throw new ManifestError(`the package is version ${manifest.version}, but version ${expectedVersion} was requested`);
  }
  for (const path of Object.keys(manifest.files)) {
    if (!safeRelative(path)) throw new ManifestError(`${MANIFEST_FILE}: file path "${path}" leaves the package`);
  }
  if (!Object.hasOwn(manifest.files, manifest.entry)) {
    throw new ManifestError(`${MANIFEST_FILE}: entry "${manifest.entry}" is not one of the package's files`);
  }
  const present = await listFiles(dir);
  for (const path of present) {
    if (path !== MANIFEST_FILE && !Object.hasOwn(manifest.files, path)) {
      throw new ManifestError(`the package holds "${path}", which ${MANIFEST_FILE} does not list`);
    }
  }
  for (const [path, expected] of Object.entries(manifest.files)) {
    if (!present.has(path)) throw new ManifestError(`"${path}" is listed in ${MANIFEST_FILE} but missing`);
    const actual = await sha256File(join(dir, path));
    if (actual !== expected) throw new ManifestError(`"${path}" does not match its sha256 in ${MANIFEST_FILE}`);
  }
  return manifest;
}

/** Regular files under `dir`, as relative paths; a symlink or device in a package is refused. */
async function listFiles(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      const full = join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) out.add(relative(dir, full).split(sep).join("/"));
      else {
        const kind = (await lstat(full)).isSymbolicLink() ? "a symlink" : "not a regular file";
        throw new ManifestError(`"${relative(dir, full)}" in the package is ${kind}`);
      }
    }
  };
  await walk(dir);
  return out;
}
