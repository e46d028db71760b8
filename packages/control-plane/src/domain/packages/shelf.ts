import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdtemp, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import type { Store } from "@keelson/db";
import { ApiError, badRequest, conflict } from "../../http/errors.ts";
import { writingDataDir, writingDataDirAsync } from "../../storage/data-dir-files.ts";
import { type PackageRow, ShelfDatabase } from "./shelf-database.ts";
import { PackageRejected, sha256File } from "./verify.ts";

/**
 * Packages served by the control plane, so hosts need no other repository (agent packages:
 * docs/agent-package.md; node packages: docs/node-package.md). A shelf is one directory,
 * `<data dir>/packages/<kind>/`, holding `<stem>-<version>.tar.gz` and its `.sha256` in
 * `sha256sum` format. A version is stored once: uploading the same bytes again is a no-op,
 * different bytes under a stored version a 409 (hosts already running it must not silently
 * differ from new ones).
 *
 * On PostgreSQL, where several replicas serve one database, the database is the shelves' source
 * of truth (shelf-database.ts) and the data dir a cache: an upload through any replica is stored
 * in both, lists and lookups read the database, and a replica asked for the file of a package
 * its data dir lacks fetches it from there first (once, however many ask at a time). The unique
 * key of the database decides a version's bytes across replicas. On SQLite (one replica) the
 * shelf is its files only.
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

/** Where a shelf lives: its data dir and, on PostgreSQL, the database every replica shares. */
export interface ShelfPlace {
  dataDir: string;
  store: Pick<Store, "dialect" | "db">;
}

export class PackageShelf {
  private readonly fileName: RegExp;
  private readonly dataDir: string;
  /** The database's shelf on PostgreSQL; undefined on SQLite. */
  private readonly shared: ShelfDatabase | undefined;

  constructor(
    readonly kind: ShelfKind,
    place: ShelfPlace,
  ) {
    this.fileName = new RegExp(`^${kind.stem}-(.+)\\.tar\\.gz$`);
    this.dataDir = place.dataDir;
    this.shared = place.store.dialect === "postgres" ? new ShelfDatabase(place.store.db, kind.dir) : undefined;
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
      // The database's row decides on PostgreSQL (whichever replica stored the version first).
      const existing = this.shared ? stored(await this.shared.publish(version, sha256, staged)) : this.local(version);
      if (existing && existing.sha256 !== sha256) {
        throw conflict(
          `${this.kind.label} ${version} is already stored with different content (sha256 ${existing.sha256}); ` +
            "give the new build its own version",
          "package_exists",
        );
      }
      if (this.local(version)?.sha256 !== sha256) await this.shelve(staged, version, sha256);
      return existing ?? describe(version, this.fileOf(version), sha256);
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

  /** Moves the checked file `staged` into place as `version`'s package. */
  private async shelve(staged: string, version: string, sha256: string): Promise<void> {
    const target = this.fileOf(version);
    // The checksum first: a package file without one is never listed or served.
    await writeFile(`${target}.sha256`, `${sha256}  ${this.kind.stem}-${version}.tar.gz\n`);
    await rename(staged, target);
  }

  /** The stored package of `version` (on PostgreSQL the database's, whether this data dir has it yet or not). */
  async find(version: string): Promise<StoredPackage | undefined> {
    if (!this.kind.versionPattern.test(version)) return undefined;
    if (!this.shared) return this.local(version);
    const row = await this.shared.row(version);
    return row && stored(row);
  }

  /** The package in this data dir: two tiny reads. */
  private local(version: string): StoredPackage | undefined {
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
    return this.shared ? (await this.shared.rows()).map(stored) : this.localList();
  }

  private async localList(): Promise<StoredPackage[]> {
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
      const pkg = this.local(version);
      if (pkg) found.push(pkg);
    }
    return found.sort((a, b) => a.storedAt.localeCompare(b.storedAt) || a.version.localeCompare(b.version));
  }

  /**
   * The stored file of `version`, for serving; 404 when there is none. On PostgreSQL a package
   * this data dir lacks (or holds with other bytes than the database's) is fetched first.
   */
  async file(version: string): Promise<{ file: string; pkg: StoredPackage }> {
    const pkg = await this.find(version);
    if (!pkg) throw new ApiError(404, "not_found", `${this.kind.label} ${version} is not stored on this control plane`);
    const file = this.fileOf(version);
    if (this.shared && this.local(version)?.sha256 !== pkg.sha256) {
      await this.shared.fetchOnce(version, this.dir, file, this.kind.label, (staged, row) =>
        this.shelve(staged, version, row.sha256),
      );
    }
    return { file, pkg };
  }

  /**
   * On PostgreSQL, stores in the database each package this data dir has and the database
   * lacks: a shelf filled before the database held the shelves, or on SQLite before
   * `keelson-server migrate-to-postgres`. A file whose bytes no longer match its `.sha256` is
   * left out; a version the database holds with other bytes keeps the database's (served from
   * here on). What it did, for the log.
   */
  async publishLocal(): Promise<{ published: string[]; skipped: string[] }> {
    const done = { published: [] as string[], skipped: [] as string[] };
    if (!this.shared) return done;
    for (const pkg of await this.localList()) {
      const row = await this.shared.row(pkg.version);
      if (row) {
        if (row.sha256 !== pkg.sha256) done.skipped.push(`${pkg.version} (the database holds other bytes)`);
        continue;
      }
      const file = this.fileOf(pkg.version);
      if ((await sha256File(file)) !== pkg.sha256) {
        done.skipped.push(`${pkg.version} (its file does not match its .sha256)`);
        continue;
      }
      const published = await this.shared.publish(pkg.version, pkg.sha256, file);
      if (published.sha256 === pkg.sha256) done.published.push(pkg.version);
      else done.skipped.push(`${pkg.version} (the database holds other bytes)`);
    }
    return done;
  }

  /** Where hosts download a stored version, relative to the control plane's base URL. */
  downloadPath(version: string): string {
    return `${this.kind.routeBase}/${encodeURIComponent(version)}/package.tar.gz`;
  }

  private fileOf(version: string): string {
    return join(this.dir, `${this.kind.stem}-${version}.tar.gz`);
  }
}

function stored(row: PackageRow): StoredPackage {
  return { version: row.version, sha256: row.sha256, sizeBytes: row.sizeBytes, storedAt: row.storedAt };
}

function describe(version: string, file: string, sha256: string): StoredPackage {
  const s = statSync(file);
  return { version, sha256, sizeBytes: s.size, storedAt: s.mtime.toISOString() };
}
