import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { usageError } from "./errors.ts";
import type { Cli, Session } from "./session.ts";

/**
 * The image bundle a config's `dockerRepo` names (spec §4.9, steps 2 and 4): one OCI or docker
 * archive (`.tar`, what `ctr images import` reads) or a directory of them. Each archive is
 * stored on the control plane (`POST /v1/imageArchives`, admin) and staged on hosts over their
 * agents' links (`POST /v1/hosts/{uuid}/images`): the agent keeps it among the host's user
 * images and imports it with the real `ctr -n k8s.io images import` when its runtime runs.
 */
export interface StoredArchive {
  /** The file's name without `.tar`: the name the archive gets on the hosts. */
  name: string;
  sha256: string;
  /** The image names it carries, as `ctr images ls` lists them. */
  images: string[];
}

/** The archive files of `dockerRepo` (absolute): the file itself, or a directory's `*.tar` in name order. */
export function archiveFiles(configFile: string, dockerRepo: string): string[] {
  let isDir: boolean;
  try {
    isDir = statSync(dockerRepo).isDirectory();
  } catch (error) {
    throw usageError(`${configFile}: dockerRepo ${dockerRepo}: ${(error as Error).message}`);
  }
  if (!isDir) {
    if (!dockerRepo.endsWith(".tar"))
      throw usageError(`${configFile}: dockerRepo must name an image archive (.tar) or a directory of them`);
    return [dockerRepo];
  }
  const files = readdirSync(dockerRepo)
    .filter((f) => f.endsWith(".tar"))
    .sort()
    .map((f) => join(dockerRepo, f));
  if (files.length === 0) throw usageError(`${configFile}: dockerRepo ${dockerRepo} holds no image archive (*.tar)`);
  return files;
}

/** Stores each archive on the control plane (the same bytes again change nothing) and says what it carries. */
export async function storeArchives(cli: Cli, s: Session, files: readonly string[]): Promise<StoredArchive[]> {
  const stored: StoredArchive[] = [];
  for (const file of files) {
    const answer: { sha256: string; images: string[] } = await s.api.json("POST", "/v1/imageArchives", {
      body: readFileSync(file),
    });
    const name = basename(file, ".tar");
    cli.out.note(`image archive ${name} stored on the control plane (${answer.images.join(", ")})`);
    stored.push({ name, sha256: answer.sha256, images: answer.images });
  }
  return stored;
}

/** Stages every archive on every host; says per host whether its runtime imported them now. */
export async function stageArchives(
  cli: Cli,
  s: Session,
  hosts: readonly { uuid: string; name: string }[],
  archives: readonly StoredArchive[],
): Promise<void> {
  for (const host of hosts) {
    for (const archive of archives) {
      const answer: { imported: boolean } = await s.api.json("POST", `/v1/hosts/${host.uuid}/images`, {
        body: { name: archive.name, sha256: archive.sha256 },
      });
      cli.out.print(
        answer.imported
          ? `${host.name}: ${archive.name} imported; the runtime lists ${archive.images.join(", ")}`
          : `${host.name}: ${archive.name} staged (no runtime runs there: imported when its node starts one)`,
      );
    }
  }
}

/** Why each host is not done: the images of `archives` its runtime does not list now. */
export async function missingImages(
  s: Session,
  hosts: readonly { uuid: string; name: string }[],
  archives: readonly StoredArchive[],
): Promise<string[]> {
  const wanted = archives.flatMap((a) => a.images);
  const lines: string[] = [];
  for (const host of hosts) {
    const { listed }: { listed: string[] } = await s.api.json("GET", `/v1/hosts/${host.uuid}/images`);
    const missing = wanted.filter((image) => !listed.includes(image));
    if (missing.length > 0) lines.push(`${host.name}: the runtime does not list ${missing.join(", ")}`);
  }
  return lines;
}
