import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { sha256File } from "@keelson/protocol";
import { ApiError, badRequest } from "../../http/errors.ts";
import { writingDataDir, writingDataDirAsync } from "../../storage/data-dir-files.ts";

const run = promisify(execFile);

/**
 * Image archives the operator's `dockerRepo` names (spec §4.9, step 4; README, "Upgrading the
 * hosts"): OCI or docker archives, the `.tar` that `ctr images import` reads. Stored by content
 * in `<data dir>/packages/images/<sha256>.tar` with `<sha256>.json` (the image names it carries,
 * read here once so every host is checked against the same list), and served to agents, which
 * stage and import them (`images.stage`).
 */
export interface StoredImageArchive {
  sha256: string;
  sizeBytes: number;
  /** The names `ctr images import` gives its images, which `ctr images ls` then lists. */
  images: string[];
}

export const IMAGE_ARCHIVE_ROUTE = "/v1/imageArchives";

export class ImageArchiveStore {
  constructor(private readonly dataDir: string) {}

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
      const existing = this.find(sha256);
      if (existing) return existing;
      await writingDataDirAsync(dir, () => writeFile(join(dir, `${sha256}.json`), `${JSON.stringify({ images })}\n`));
      await rename(tmp, this.fileOf(sha256));
      return { sha256, sizeBytes: bytes.length, images };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  find(sha256: string): StoredImageArchive | undefined {
    if (!/^[0-9a-f]{64}$/.test(sha256)) return undefined;
    try {
      const { images } = JSON.parse(readFileSync(join(this.dir, `${sha256}.json`), "utf8")) as { images: string[] };
      return { sha256, sizeBytes: statSync(this.fileOf(sha256)).size, images };
    } catch {
      return undefined;
    }
  }

  /** The stored archive, for serving or staging; 404 when there is none. */
  get(sha256: string): { file: string; archive: StoredImageArchive } {
    const archive = this.find(sha256);
    if (!archive) throw new ApiError(404, "not_found", `no image archive with sha256 ${sha256} is stored here`);
    return { file: this.fileOf(sha256), archive };
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
