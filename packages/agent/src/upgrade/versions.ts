import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
} from "node:fs";
import { readdir, rename, rm } from "node:fs/promises";
import { basename, join } from "node:path";
import { writeFileAtomic } from "../state-dir.ts";
import { MANIFEST_FILE, type PackageManifest } from "./manifest.ts";

/**
 * Installed agent versions in `<state dir>/versions`:
 *
 *     versions/<version>/      one unpacked, verified package per version
 *     versions/current  -> <version>    what the launcher runs
 *     versions/previous -> <version>    what a failed upgrade goes back to
 *     versions/trial.json      present from the switch until the new version reports ready
 *
 * Links are relative and replaced by renaming a freshly made link over the old one, which is
 * atomic: at every instant `current` names a complete version. No `current` means the
 * launcher runs the workspace's sources (a host set up from a checkout).
 */
export interface InstalledVersion {
  version: string;
  dir: string;
  entry: string;
  manifest: PackageManifest;
}

/** Written at the switch; the launcher's verdict on the next start decides keep or roll back. */
export interface TrialRecord {
  version: string;
  /** Version to go back to; null: back to the workspace sources (no `current`). */
  previous: string | null;
  switchedAt: string;
}

export class VersionStore {
  constructor(readonly dir: string) {}

  get currentLink(): string {
    return join(this.dir, "current");
  }

  get previousLink(): string {
    return join(this.dir, "previous");
  }

  get trialFile(): string {
    return join(this.dir, "trial.json");
  }

  ensure(): this {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    return this;
  }

  /** Version a link points to, or undefined when the link does not exist. */
  linkTarget(name: "current" | "previous"): string | undefined {
    try {
      return basename(readlinkSync(join(this.dir, name)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  /** The installed version `name` (or a link) resolves to, if it is complete enough to run. */
  installed(name: string): InstalledVersion | undefined {
    const version = name === "current" || name === "previous" ? this.linkTarget(name) : name;
    if (!version) return undefined;
    const dir = join(this.dir, version);
    try {
      const manifest = JSON.parse(readFileSync(join(dir, MANIFEST_FILE), "utf8")) as PackageManifest;
      const entry = join(dir, manifest.entry);
      if (typeof manifest.entry !== "string" || !existsSync(entry)) return undefined;
      return { version, dir, entry, manifest };
    } catch {
      return undefined;
    }
  }

  /** A fresh directory for unpacking, inside versions/ so the final move is a rename. */
  stagingDir(): string {
    const dir = join(this.dir, `.staging-${randomBytes(6).toString("hex")}`);
    mkdirSync(dir, { mode: 0o700 });
    return dir;
  }

  tempFile(suffix: string): string {
    return join(this.dir, `.download-${randomBytes(6).toString("hex")}${suffix}`);
  }

  /** Moves a verified staging dir to versions/<version>, replacing a stale copy of it. */
  async install(stagingDir: string, version: string): Promise<string> {
    if (this.linkTarget("current") === version) {
      throw new Error(`version ${version} is the current version; it cannot be replaced while in use`);
    }
    const target = join(this.dir, version);
    await rm(target, { recursive: true, force: true });
    await rename(stagingDir, target);
    return target;
  }

  /**
   * Points `current` at `version`, keeps the old target as `previous` and records the trial.
   * The order matters for a crash in between: `previous` and trial.json exist before
   * `current` moves, so whatever the launcher finds on its next start it can roll back.
   */
  switchTo(version: string, now = new Date()): TrialRecord {
    const old = this.linkTarget("current") ?? null;
    if (old) this.replaceLink("previous", old);
    const trial: TrialRecord = { version, previous: old, switchedAt: now.toISOString() };
    writeFileAtomic(this.trialFile, `${JSON.stringify(trial)}\n`);
    this.replaceLink("current", version);
    return trial;
  }

  readTrial(): TrialRecord | undefined {
    try {
      return JSON.parse(readFileSync(this.trialFile, "utf8")) as TrialRecord;
    } catch {
      return undefined;
    }
  }

  clearTrial(): void {
    rmSync(this.trialFile, { force: true });
  }

  /** Undoes a switch: `current` back to the trial's previous version (or removed). */
  rollback(trial: TrialRecord): void {
    if (trial.previous) this.replaceLink("current", trial.previous);
    else this.removeLink("current");
    this.clearTrial();
  }

  /** Removes versions that are neither current nor previous, and leftovers of failed attempts. */
  async prune(): Promise<string[]> {
    const keep = new Set([this.linkTarget("current"), this.linkTarget("previous"), "current", "previous"]);
    const removed: string[] = [];
    for (const entry of await readdir(this.dir, { withFileTypes: true })) {
      if (keep.has(entry.name) || entry.name === basename(this.trialFile)) continue;
      if (!entry.isDirectory() && !entry.name.startsWith(".")) continue;
      await rm(join(this.dir, entry.name), { recursive: true, force: true });
      removed.push(entry.name);
    }
    return removed;
  }

  private replaceLink(name: "current" | "previous", version: string): void {
    const tmp = join(this.dir, `.${name}-${randomBytes(4).toString("hex")}`);
    symlinkSync(version, tmp);
    renameSync(tmp, join(this.dir, name));
  }

  private removeLink(name: "current" | "previous"): void {
    try {
      unlinkSync(join(this.dir, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
}
