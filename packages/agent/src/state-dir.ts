import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic as writeAtomic } from "./services/atomic-file.ts";

/**
 * The agent's state dir: everything it must keep across restarts (host id and credential,
 * the local API token, installed versions, the last upgrade outcome). Every secret file is
 * 0600 and written by rename, so a crash mid-write never leaves a half file behind.
 */
export const STATE_FILES = {
  localApiToken: "local-api.token",
  /** Outcome of the last self-upgrade (see upgrade/status.ts). */
  upgradeStatus: "upgrade-status.json",
  versions: "versions",
} as const;

export class StateDir {
  constructor(readonly root: string) {}

  /** Creates the dir (0700: it holds the host credential) if it does not exist yet. */
  ensure(): this {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    return this;
  }

  path(...parts: string[]): string {
    return join(this.root, ...parts);
  }

  readText(name: string): string | undefined {
    try {
      return readFileSync(this.path(name), "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  readJson<T>(name: string): T | undefined {
    const text = this.readText(name);
    if (text === undefined) return undefined;
    try {
      return JSON.parse(text) as T;
    } catch {
      // A file we cannot parse is as good as absent; the writer is always atomic, so this only
      // happens when someone edited it by hand.
      return undefined;
    }
  }

  writeText(name: string, text: string, mode = 0o600): void {
    writeFileAtomic(this.path(name), text, mode);
  }

  writeJson(name: string, value: unknown, mode = 0o600): void {
    this.writeText(name, `${JSON.stringify(value, null, 2)}\n`, mode);
  }

  /**
   * The token of the local API (`X-Auth-Token`), generated at first start. An operator on the
   * host reads it from this file; it never leaves the host.
   */
  ensureLocalApiToken(): string {
    const existing = this.readText(STATE_FILES.localApiToken)?.trim();
    if (existing) return existing;
    const token = `kla_${randomBytes(24).toString("base64url")}`;
    this.writeText(STATE_FILES.localApiToken, `${token}\n`);
    return token;
  }
}

/**
 * An atomic write of a state file (services/atomic-file.ts: temp file, fsync, rename; the temp
 * file removed when the write fails), in a directory created 0700.
 */
export function writeFileAtomic(file: string, data: string | Buffer, mode = 0o600): void {
  writeAtomic(file, data, mode, { dirMode: 0o700 });
}
