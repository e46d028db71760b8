import { randomUUID } from "node:crypto";
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { type CommandPayload, sha256File } from "@keelson/protocol";
import { downloadPackage } from "../upgrade/download.ts";

/**
 * Image archives staged on this host by `images.stage` (the operator's `dockerRepo`, spec
 * §4.9): downloaded from the control plane into the host's user images directory
 * (`<host root>/var/lib/keelson/images`) as `<name>.tar`, where the "load user images" phase
 * imports every archive on each start, so a staged archive survives restarts and reinstalls.
 */

export class ImageArchiveError extends Error {
  override name = "ImageArchiveError";
}

export interface StageOptions {
  /** `<host root>/var/lib/keelson/images` (nodePaths().userImages). */
  dir: string;
  /** The control plane's base URL now: the payload's url is relative to it. */
  controlPlane: string;
  fetch?: typeof fetch;
  signal?: AbortSignal;
}

/**
 * Puts the archive in place (idempotent: the same bytes already there are kept, so a re-run
 * does not re-import them) and answers its path. The sha256 comes over the signed-in link: a
 * download that hashes otherwise is refused and leaves nothing behind.
 */
export async function stageImageArchive(
  payload: CommandPayload<"images.stage">,
  options: StageOptions,
): Promise<string> {
  const target = join(options.dir, `${payload.name}.tar`);
  if ((await sha256File(target).catch(() => undefined)) === payload.sha256) return target;
  mkdirSync(options.dir, { recursive: true });
  const url = new URL(payload.url, `${options.controlPlane}/`).href;
  // A dot file: the phase imports only `*.tar`, so it never sees a part-written archive.
  const part = join(options.dir, `.${payload.name}-${randomUUID()}.part`);
  try {
    const got = await downloadPackage(url, part, {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    if (got.sha256 !== payload.sha256) {
      throw new ImageArchiveError(
        `image archive ${payload.name} from ${url} has sha256 ${got.sha256}, not ${payload.sha256} as the control plane said`,
      );
    }
    renameSync(part, target);
    return target;
  } finally {
    rmSync(part, { force: true });
  }
}

/** The names of the payload the runtime does not list. */
export function missingImages(wanted: readonly string[], listed: readonly string[]): string[] {
  const present = new Set(listed);
  return wanted.filter((name) => !present.has(name));
}
