import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, relative, sep } from "node:path";
import { Compile } from "typebox/compile";
import { AGENT_MANIFEST_FILE, AgentPackageManifest } from "./agent-package.ts";

/**
 * Checks an unpacked agent package. The agent runs it before installing a package and the
 * control plane before storing an uploaded one, so both refuse exactly the same packages.
 */
export class AgentPackageError extends Error {
  override name = "AgentPackageError";
}

const manifestValidator = Compile(AgentPackageManifest);

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
 * version (when given), every listed file present with its sha256, no unlisted file, no
 * symlink or special file, and the entry among the files.
 */
export async function verifyAgentPackageDir(dir: string, expectedVersion?: string): Promise<AgentPackageManifest> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, AGENT_MANIFEST_FILE), "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new AgentPackageError(
      code === "ENOENT" ? `the package has no ${AGENT_MANIFEST_FILE}` : `${AGENT_MANIFEST_FILE} is not valid JSON`,
    );
  }
  if (!manifestValidator.Check(raw)) {
    const first = manifestValidator.Errors(raw)[0];
    const where = first?.instancePath ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "manifest";
    throw new AgentPackageError(`${AGENT_MANIFEST_FILE}: ${where} ${first?.message ?? "is invalid"}`);
  }
  const manifest = raw;
  if (expectedVersion !== undefined && manifest.version !== expectedVersion) {
    throw new AgentPackageError(
      `the package is version ${manifest.version}, but version ${expectedVersion} was requested`,
    );
  }
  for (const path of Object.keys(manifest.files)) {
    if (!safeRelative(path)) {
      throw new AgentPackageError(`${AGENT_MANIFEST_FILE}: file path "${path}" leaves the package`);
    }
  }
  if (!Object.hasOwn(manifest.files, manifest.entry)) {
    throw new AgentPackageError(`${AGENT_MANIFEST_FILE}: entry "${manifest.entry}" is not one of the package's files`);
  }
  const present = await regularFiles(dir);
  for (const path of present) {
    if (path !== AGENT_MANIFEST_FILE && !Object.hasOwn(manifest.files, path)) {
      throw new AgentPackageError(`the package holds "${path}", which ${AGENT_MANIFEST_FILE} does not list`);
    }
  }
  for (const [path, expected] of Object.entries(manifest.files)) {
    if (!present.has(path)) throw new AgentPackageError(`"${path}" is listed in ${AGENT_MANIFEST_FILE} but missing`);
    if ((await sha256File(join(dir, path))) !== expected) {
      throw new AgentPackageError(`"${path}" does not match its sha256 in ${AGENT_MANIFEST_FILE}`);
    }
  }
  return manifest;
}

/** Regular files under `dir`, as relative paths; a symlink or device in a package is refused. */
async function regularFiles(dir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      const full = join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) out.add(relative(dir, full).split(sep).join("/"));
      else {
        const kind = (await lstat(full)).isSymbolicLink() ? "a symlink" : "not a regular file";
        throw new AgentPackageError(`"${relative(dir, full)}" in the package is ${kind}`);
      }
    }
  };
  await walk(dir);
  return out;
}
