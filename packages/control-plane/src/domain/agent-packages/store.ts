import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { copyFile, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { AGENT_PACKAGE_NAME, AGENT_VERSION_PATTERN } from "@keelson/protocol";
import { ApiError, badRequest, conflict } from "../../http/errors.ts";
import { PackageRejected, sha256File, verifyPackageTarball } from "./verify.ts";

/**
 * Agent packages served by the control plane (docs/agent-package.md "Served by the control
 * plane"), so hosts need no other repository: `<data dir>/packages/agent/` holds
 * `keelson-agent-<version>.tar.gz` and its `.sha256` in `sha256sum` format. A version is stored
 * once: uploading the same bytes again is a no-op, different bytes under a stored version a 409
 * (hosts already running it must not silently differ from new ones).
 */
export interface StoredPackage {
  version: string;
  sha256: string;
  sizeBytes: number;
  storedAt: string;
}

const VERSION = new RegExp(AGENT_VERSION_PATTERN);
const FILE = /^keelson-agent-(.+)\.tar\.gz$/;

export function packageDir(dataDir: string): string {
  return join(dataDir, "packages", "agent");
}

function fileOf(dataDir: string, version: string): string {
  return join(packageDir(dataDir), `${AGENT_PACKAGE_NAME}-${version}.tar.gz`);
}

/** Verifies the tarball at `source` and stores it; `source` is left as it was. */
export async function storePackageFile(dataDir: string, source: string): Promise<StoredPackage> {
  const dir = packageDir(dataDir);
  mkdirSync(dir, { recursive: true });
  // Staged inside the store's directory so the final rename is atomic (same filesystem).
  const staged = join(dir, `.upload-${randomUUID()}.tar.gz`);
  const unpacked = await mkdtemp(join(dir, ".verify-"));
  try {
    await copyFile(source, staged);
    let version: string;
    try {
      version = (await verifyPackageTarball(staged, unpacked)).version;
    } catch (err) {
      if (err instanceof PackageRejected) throw badRequest("package", `the agent package is refused: ${err.message}`);
      throw err;
    }
    const sha256 = await sha256File(staged);
    const existing = await findPackage(dataDir, version);
    if (existing) {
      if (existing.sha256 === sha256) return existing;
      throw conflict(
        `agent package ${version} is already stored with different content (sha256 ${existing.sha256}); ` +
          "give the new build its own version",
        "package_exists",
      );
    }
    const target = fileOf(dataDir, version);
    // The checksum first: a package file without one is never listed or served.
    await writeFile(`${target}.sha256`, `${sha256}  ${AGENT_PACKAGE_NAME}-${version}.tar.gz\n`);
    await rename(staged, target);
    return describe(version, target, sha256);
  } finally {
    await rm(staged, { force: true });
    await rm(unpacked, { recursive: true, force: true });
  }
}

/** An upload's bytes, written to a temporary file and stored like an import. */
export async function storePackageBytes(dataDir: string, bytes: Buffer): Promise<StoredPackage> {
  if (bytes.length === 0) throw badRequest("package", "the body is empty: send the .tar.gz built by pnpm pack:agent");
  const dir = packageDir(dataDir);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.body-${randomUUID()}.tar.gz`);
  try {
    await writeFile(tmp, bytes);
    return await storePackageFile(dataDir, tmp);
  } finally {
    await rm(tmp, { force: true });
  }
}

/** Import from a file on the control plane's host (admin only: it reads local paths). */
export async function importPackagePath(dataDir: string, path: string): Promise<StoredPackage> {
  if (!isAbsolute(path)) throw badRequest("path", "path must be an absolute path on the control plane's host");
  let isFile = false;
  try {
    isFile = (await stat(path)).isFile();
  } catch {
    throw badRequest("path", `${path} does not exist or cannot be read`);
  }
  if (!isFile) throw badRequest("path", `${path} is not a regular file`);
  return storePackageFile(dataDir, path);
}

export async function findPackage(dataDir: string, version: string): Promise<StoredPackage | undefined> {
  if (!VERSION.test(version)) return undefined;
  const file = fileOf(dataDir, version);
  let sum: string;
  try {
    sum = (await readFile(`${file}.sha256`, "utf8")).split(/\s+/)[0] ?? "";
  } catch {
    return undefined;
  }
  try {
    return await describe(version, file, sum);
  } catch {
    return undefined;
  }
}

export async function listPackages(dataDir: string): Promise<StoredPackage[]> {
  let names: string[];
  try {
    names = await readdir(packageDir(dataDir));
  } catch {
    return [];
  }
  const found: StoredPackage[] = [];
  for (const name of names) {
    const version = FILE.exec(name)?.[1];
    if (!version) continue;
    const pkg = await findPackage(dataDir, version);
    if (pkg) found.push(pkg);
  }
  return found.sort((a, b) => a.storedAt.localeCompare(b.storedAt) || a.version.localeCompare(b.version));
}

/** The stored file of `version`, for serving; 404 when there is none. */
export async function packageFile(dataDir: string, version: string): Promise<{ file: string; pkg: StoredPackage }> {
  const pkg = await findPackage(dataDir, version);
  if (!pkg) throw new ApiError(404, "not_found", `agent package ${version} is not stored on this control plane`);
  return { file: fileOf(dataDir, version), pkg };
}

/** Where agents download a stored version, relative to the control plane's base URL. */
export function packagePath(version: string): string {
  return `/v1/agentPackages/${encodeURIComponent(version)}/package.tar.gz`;
}

async function describe(version: string, file: string, sha256: string): Promise<StoredPackage> {
  const s = await stat(file);
  return { version, sha256, sizeBytes: s.size, storedAt: s.mtime.toISOString() };
}
