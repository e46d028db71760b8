import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdtemp, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { ApiError, badRequest, conflict } from "../../http/errors.ts";
import { writingDataDir, writingDataDirAsync } from "../../storage/data-dir-files.ts";
import { PackageRejected, sha256File } from "./verify.ts";

/**
 * Packages served by the control plane, so hosts need no other repository (agent packages:
 * docs/agent-package.md; node packages: docs/node-package.md). A shelf is one directory,
 * `<data dir>/packages/<kind>/`, holding `<stem>-<version>.tar.gz` and its `.sha256` in
 * `sha256sum` format. A version is stored once: uploading the same bytes again is a no-op,
 * different bytes under a stored version a 409 (hosts already running it must not silently
 * differ from new ones).
 */
export interface StoredPackage {
  version: string;
  sha256: string;
  sizeBytes: number;
  storedAt: string;
}

export interface ShelfKind {
  /** Directory under `<data dir>/packages/`. */
  dir: string;
  /** File name stem, `<stem>-<version>.tar.gz`. */
  stem: string;
  /** "agent package", for messages. */
  label: string;
  /** How to build one, for the message of an empty upload. */
  buildHint: string;
  /** Where downloads are served, relative to the control plane's base URL. */
  routeBase: string;
  versionPattern: RegExp;
  /** Unpacks into `dir` and verifies; the version the package declares. Throws PackageRejected. */
  verify(tarball: string, dir: string): Promise<string>;
  /** Rules beyond the package itself (a node package's role version must be in the catalogue). */
  accept?(version: string): void;
}

export class PackageShelf {
  private readonly fileName: RegExp;

  constructor(
    readonly kind: ShelfKind,
    private readonly dataDir: string,
  ) {
    this.fileName = new RegExp(`^${kind.stem}-(.+)\\.tar\\.gz$`);
  }

  get dir(): string {
    return join(this.dataDir, "packages", this.kind.dir);
  }

  /**
   * Verifies the tarball at `source` and stores it; `source` is left as it was. The shelf is in
   * the data dir: no space there is a DataDirFullError (507), with the staged files removed.
   */
  storeFile(source: string): Promise<StoredPackage> {
    return writingDataDirAsync(this.dir, () => this.stage(source));
  }

  private async stage(source: string): Promise<StoredPackage> {
    const dir = this.dir;
    mkdirSync(dir, { recursive: true });
    // Staged inside the shelf's directory so the final rename is atomic (same filesystem).
    const staged = join(dir, `.upload-${randomUUID()}.tar.gz`);
    const unpacked = await mkdtemp(join(dir, ".verify-"));
    try {
      await copyFile(source, staged);
      let version: string;
      try {
        version = await this.kind.verify(staged, unpacked);
      } catch (err) {
        if (err instanceof PackageRejected)
          throw badRequest("package", `the ${this.kind.label} is refused: ${err.message}`);
        throw err;
      }
      this.kind.accept?.(version);
      const sha256 = await sha256File(staged);
      const existing = this.find(version);
      if (existing) {
        if (existing.sha256 === sha256) return existing;
        throw conflict(
          `${this.kind.label} ${version} is already stored with different content (sha256 ${existing.sha256}); ` +
            "give the new build its own version",
          "package_exists",
        );
      }
      const target = this.fileOf(version);
      // The checksum first: a package file without one is never listed or served.
      await writeFile(`${target}.sha256`, `${sha256}  ${this.kind.stem}-${version}.tar.gz\n`);
      await rename(staged, target);
      return describe(version, target, sha256);
    } finally {
      await rm(staged, { force: true });
      await rm(unpacked, { recursive: true, force: true });
    }
  }

  /** An upload's bytes, written to a temporary file and stored like an import. */
  async storeBytes(bytes: Buffer): Promise<StoredPackage> {
    if (bytes.length === 0)
      throw badRequest("package", `the body is empty: send the .tar.gz built by ${this.kind.buildHint}`);
    const dir = this.dir;
    writingDataDir(dir, () => mkdirSync(dir, { recursive: true }));
    const tmp = join(dir, `.body-${randomUUID()}.tar.gz`);
    try {
      await writingDataDirAsync(tmp, () => writeFile(tmp, bytes));
      return await this.storeFile(tmp);
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Import from a file on the control plane's host (admin only: it reads local paths). */
  async importPath(path: string): Promise<StoredPackage> {
    if (!isAbsolute(path)) throw badRequest("path", "path must be an absolute path on the control plane's host");
    let isFile = false;
    try {
      isFile = (await stat(path)).isFile();
    } catch {
      throw badRequest("path", `${path} does not exist or cannot be read`);
    }
    if (!isFile) throw badRequest("path", `${path} is not a regular file`);
    return this.storeFile(path);
  }

  /** Synchronous: two tiny reads, cheap enough for building a command payload. */
  find(version: string): StoredPackage | undefined {
    if (!this.kind.versionPattern.test(version)) return undefined;
    const file = this.fileOf(version);
    try {
      const sum = readFileSync(`${file}.sha256`, "utf8").split(/\s+/)[0] ?? "";
      return describe(version, file, sum);
    } catch {
      return undefined;
    }
  }

  async list(): Promise<StoredPackage[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return [];
    }
    const found: StoredPackage[] = [];
    for (const name of names) {
      const version = this.fileName.exec(name)?.[1];
      if (!version) continue;
      const pkg = this.find(version);
      if (pkg) found.push(pkg);
    }
    return found.sort((a, b) => a.storedAt.localeCompare(b.storedAt) || a.version.localeCompare(b.version));
  }

  /** The stored file of `version`, for serving; 404 when there is none. */
  async file(version: string): Promise<{ file: string; pkg: StoredPackage }> {
    const pkg = this.find(version);
    if (!pkg) throw new ApiError(404, "not_found", `${this.kind.label} ${version} is not stored on this control plane`);
    return { file: this.fileOf(version), pkg };
  }

  /** Where hosts download a stored version, relative to the control plane's base URL. */
  downloadPath(version: string): string {
    return `${this.kind.routeBase}/${encodeURIComponent(version)}/package.tar.gz`;
  }

  private fileOf(version: string): string {
    return join(this.dir, `${this.kind.stem}-${version}.tar.gz`);
  }
}

function describe(version: string, file: string, sha256: string): StoredPackage {
  const s = statSync(file);
  return { version, sha256, sizeBytes: s.size, storedAt: s.mtime.toISOString() };
}
