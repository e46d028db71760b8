import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, relative, sep } from "node:path";
import type { Static, TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { AGENT_MANIFEST_FILE, AgentPackageManifest } from "./agent-package.ts";
import { NODE_MANIFEST_FILE, NodePackageManifest } from "./node-package.ts";

/**
 * Checks unpacked packages (agent and node packages alike). An agent runs these checks before
 * installing a package and the control plane before storing an uploaded one, so both refuse
 * exactly the same packages.
 */
export class PackageError extends Error {
  override name = "PackageError";
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

/** Reads `dir/<file>` and checks it against `schema`; errors name the manifest field. */
async function readManifest<S extends TSchema>(dir: string, file: string, schema: S): Promise<Static<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, file), "utf8"));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new PackageError(code === "ENOENT" ? `the package has no ${file}` : `${file} is not valid JSON`);
  }
  const validator = validatorFor(schema);
  if (!validator.Check(raw)) {
    const first = validator.Errors(raw)[0];
    const where = first?.instancePath ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "manifest";
    throw new PackageError(`${file}: ${where} ${first?.message ?? "is invalid"}`);
  }
  return raw as Static<S>;
}

const validators = new Map<TSchema, ReturnType<typeof Compile>>();
function validatorFor(schema: TSchema): ReturnType<typeof Compile> {
  let validator = validators.get(schema);
  if (!validator) {
    validator = Compile(schema);
    validators.set(schema, validator);
  }
  return validator;
}

/**
 * Every file `files` lists is present with its sha256, nothing else is there but `manifestFile`,
 * no path leaves the package, and there is no symlink or special file.
 */
async function checkFiles(dir: string, manifestFile: string, files: Record<string, string>): Promise<void> {
  for (const path of Object.keys(files)) {
    if (!safeRelative(path)) throw new PackageError(`${manifestFile}: file path "${path}" leaves the package`);
  }
  const present = await regularFiles(dir);
  for (const path of present) {
    if (path !== manifestFile && !Object.hasOwn(files, path)) {
      throw new PackageError(`the package holds "${path}", which ${manifestFile} does not list`);
    }
  }
  for (const [path, expected] of Object.entries(files)) {
    if (!present.has(path)) throw new PackageError(`"${path}" is listed in ${manifestFile} but missing`);
    if ((await sha256File(join(dir, path))) !== expected) {
      throw new PackageError(`"${path}" does not match its sha256 in ${manifestFile}`);
    }
  }
}

/**
 * An unpacked agent package in `dir`: the manifest schema, the expected version (when given),
 * the entry among the files, and every file as `checkFiles` wants it.
 */
export async function verifyAgentPackageDir(dir: string, expectedVersion?: string): Promise<AgentPackageManifest> {
  const manifest = await readManifest(dir, AGENT_MANIFEST_FILE, AgentPackageManifest);
  if (expectedVersion !== undefined && manifest.version !== expectedVersion) {
    throw new PackageError(`the package is version ${manifest.version}, but version ${expectedVersion} was requested`);
  }
  if (!Object.hasOwn(manifest.files, manifest.entry)) {
    throw new PackageError(`${AGENT_MANIFEST_FILE}: entry "${manifest.entry}" is not one of the package's files`);
  }
  await checkFiles(dir, AGENT_MANIFEST_FILE, manifest.files);
  return manifest;
}

/**
 * An unpacked node package in `dir`: the manifest schema, the expected role version (when
 * given), every binary it names present under `bin/`, and every file as `checkFiles` wants it.
 */
export async function verifyNodePackageDir(dir: string, expectedRoleVersion?: string): Promise<NodePackageManifest> {
  const manifest = await readManifest(dir, NODE_MANIFEST_FILE, NodePackageManifest);
  if (expectedRoleVersion !== undefined && manifest.roleVersion !== expectedRoleVersion) {
    throw new PackageError(
      `the node package is for role version ${manifest.roleVersion}, but ${expectedRoleVersion} was requested`,
    );
  }
  for (const binary of Object.keys(manifest.binaries)) {
    if (!Object.hasOwn(manifest.files, `bin/${binary}`)) {
      throw new PackageError(`${NODE_MANIFEST_FILE}: binary "${binary}" has no file bin/${binary}`);
    }
  }
  await checkFiles(dir, NODE_MANIFEST_FILE, manifest.files);
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
        throw new PackageError(`"${relative(dir, full)}" in the package is ${kind}`);
      }
    }
  };
  await walk(dir);
  return out;
}
