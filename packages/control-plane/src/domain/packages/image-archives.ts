import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { readdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { sha256File } from "@keelson/protocol";
import { ApiError, badRequest } from "../../http/errors.ts";
import { writingDataDir, writingDataDirAsync } from "../../storage/data-dir-files.ts";
import type { ShelfPlace } from "./shelf.ts";
import { ShelfDatabase } from "./shelf-database.ts";

const run = promisify(execFile);

const SHA256 = /^[0-9a-f]{64}$/;

/**
 * Image archives the operator's `dockerRepo` names (spec §4.9, step 4; README, "Upgrading the
 * hosts"): OCI or docker archives, the `.tar` that `ctr images import` reads. Stored by content
 * in `<data dir>/packages/images/<sha256>.tar` with `<sha256>.json` (the image names it carries,
 * read here once so every host is checked against the same list), and served to agents, which
 * stage and import them (`images.stage`). On PostgreSQL the database holds them too, for every
 * replica, with their image names, and the data dir is a cache, as for the package shelves
 * (shelf.ts, shelf-database.ts: kind "images", the sha256 as the version).
 */
export interface StoredImageArchive {
  sha256: string;
  sizeBytes: number;
  /** The names `ctr images import` gives its images, which `ctr images ls` then lists. */
  images: string[];
}

export const IMAGE_ARCHIVE_ROUTE = "/v1/imageArchives";

export class ImageArchiveStore {
  private readonly dataDir: string;
  /** The database's archives on PostgreSQL; undefined on SQLite. */
  private readonly shared: ShelfDatabase | undefined;

  constructor(place: ShelfPlace) {
    this.dataDir = place.dataDir;
    this.shared = place.store.dialect === "postgres" ? new ShelfDatabase(place.store.db, "images") : undefined;
  }

  get dir(): string {
    return join(this.dataDir, "packages", "images");
  }

  /** Checks the bytes are an image archive naming its images, and stores them (the same bytes again: no-op). */
  async storeBytes(bytes: Buffer): Promise<StoredImageArchive> {
    if (bytes.length === 0)
      throw badRequest("archive", "the body is empty: send an OCI or docker image archive (.tar)");
    const dir = this.dir;
    writingDataDir(dir, () => mkdirSync(dir, { recursive: true }));
    const tmp = join(dir, `.upload-${randomUUID()}.tar`);
    try {
      await writingDataDirAsync(tmp, () => writeFile(tmp, bytes));
      const images = await archiveImageNames(tmp);
      const sha256 = await sha256File(tmp);
      // Stored by content: the same sha256 is the same archive, whichever replica stored it first.
      await this.shared?.publish(sha256, sha256, tmp, JSON.stringify({ images }));
      const existing = this.local(sha256);
      if (existing) return existing;
      await writingDataDirAsync(dir, () => this.place(tmp, sha256, images));
      return { sha256, sizeBytes: bytes.length, images };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Writes the archive's image names beside it, then renames the checked file into place. */
  private async place(staged: string, sha256: string, images: string[]): Promise<void> {
    await writeFile(join(this.dir, `${sha256}.json`), `${JSON.stringify({ images })}\n`);
    await rename(staged, this.fileOf(sha256));
  }

  /** The stored archive (on PostgreSQL the database's, whether this data dir has it yet or not). */
  async find(sha256: string): Promise<StoredImageArchive | undefined> {
    if (!SHA256.test(sha256)) return undefined;
    if (!this.shared) return this.local(sha256);
    const row = await this.shared.row(sha256);
    return (
      row && {
        sha256,
        sizeBytes: row.sizeBytes,
        images: (JSON.parse(row.meta ?? "{}") as { images?: string[] }).images ?? [],
      }
    );
  }

  private local(sha256: string): StoredImageArchive | undefined {
    if (!SHA256.test(sha256)) return undefined;
    try {
      const { images } = JSON.parse(readFileSync(join(this.dir, `${sha256}.json`), "utf8")) as { images: string[] };
      return { sha256, sizeBytes: statSync(this.fileOf(sha256)).size, images };
    } catch {
      return undefined;
    }
  }

  /** The stored archive, for serving; 404 when there is none. On PostgreSQL one this data dir lacks is fetched first. */
  async get(sha256: string): Promise<{ file: string; archive: StoredImageArchive }> {
    const archive = await this.find(sha256);
    if (!archive) throw new ApiError(404, "not_found", `no image archive with sha256 ${sha256} is stored here`);
    const file = this.fileOf(sha256);
    if (this.shared && !this.local(sha256)) {
      await this.shared.fetchOnce(sha256, this.dir, file, "image archive", (staged) =>
        this.place(staged, sha256, archive.images),
      );
    }
    return { file, archive };
  }

  /**
   * On PostgreSQL, stores in the database each archive of this data dir it lacks (stored before
   * the database held them); one whose bytes no longer match its name is left out. What it did.
   */
  async publishLocal(): Promise<{ published: string[]; skipped: string[] }> {
    const done = { published: [] as string[], skipped: [] as string[] };
    if (!this.shared) return done;
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const name of names) {
      const sha256 = /^([0-9a-f]{64})\.tar$/.exec(name)?.[1];
      const archive = sha256 && this.local(sha256);
      if (!sha256 || !archive || (await this.shared.row(sha256))) continue;
      if ((await sha256File(this.fileOf(sha256))) !== sha256) {
        done.skipped.push(`${sha256} (its bytes do not match its name)`);
        continue;
      }
      await this.shared.publish(sha256, sha256, this.fileOf(sha256), JSON.stringify({ images: archive.images }));
      done.published.push(sha256);
    }
    return done;
  }

  /** Where agents download it, relative to the control plane's base URL. */
  downloadPath(sha256: string): string {
    return `${IMAGE_ARCHIVE_ROUTE}/${sha256}/archive.tar`;
  }

  private fileOf(sha256: string): string {
    return join(this.dir, `${sha256}.tar`);
  }
}

/**
 * The image names in an archive as containerd's importer gives them: an OCI archive's index
 * (`io.containerd.image.name`, else a full `org.opencontainers.image.ref.name`), as written, or a
 * docker archive's `manifest.json` RepoTags, normalised as containerd does (`busybox:1` is
 * `docker.io/library/busybox:1`). An archive that names none is refused: nothing could check
 * that the hosts have its images.
 */
export async function archiveImageNames(file: string): Promise<string[]> {
  const member = async (name: string) => {
    try {
      return JSON.parse((await run("tar", ["-xOf", file, name], { maxBuffer: 16 * 1024 * 1024 })).stdout) as unknown;
    } catch {
      return undefined;
    }
  };
  const names = new Set<string>();
  const index = (await member("index.json")) as {
    manifests?: { annotations?: Record<string, string> }[];
  } | null;
  for (const m of index?.manifests ?? []) {
    const a = m.annotations ?? {};
    const name = a["io.containerd.image.name"] ?? a["org.opencontainers.image.ref.name"];
    // Taken as it is written: containerd does not normalise an OCI index's names.
    if (name?.includes("/") || name?.includes(":")) names.add(name);
  }
  const manifest = (await member("manifest.json")) as { RepoTags?: string[] }[] | null;
  if (Array.isArray(manifest))
    for (const m of manifest) for (const tag of m.RepoTags ?? []) names.add(dockerNormalised(tag));
  if (names.size === 0) {
    throw badRequest(
      "archive",
      index || manifest
        ? "the image archive names no image (an OCI index needs io.containerd.image.name annotations, a docker archive RepoTags)"
        : "not an image archive: a tar with an OCI index.json or a docker manifest.json",
    );
  }
  return [...names].sort();
}

/** containerd's reference normalisation for names without a registry (docker's default). */
export function dockerNormalised(name: string): string {
  const first = name.split("/")[0] ?? "";
  const hasDomain = name.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost");
  if (hasDomain) return name;
  return name.includes("/") ? `docker.io/${name}` : `docker.io/library/${name}`;
}
