import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CliError } from "../errors.ts";

/** A release's manifest.json, as `pnpm pack:release` writes it (scripts/pack-release.ts). */
export interface ReleaseManifest {
  format: 1;
  name: "keelson";
  version: string;
  /** The number of migrations of each dialect: a database is at most this far along. */
  schemaVersion: { sqlite: number; postgres: number };
  protocolVersion: number;
  /** The oldest release a running installation may be upgraded from to this one. */
  upgradesFrom: { minimum: string };
  createdAt: string;
  /** Paths inside the release. */
  entries: { server: string; cli: string; agentPackage: string; nodePackages: string };
}

export const RELEASE_MANIFEST = "manifest.json";
export const RELEASE_SUMS = "SHA256SUMS";

export function readReleaseManifest(dir: string): ReleaseManifest {
  const file = join(dir, RELEASE_MANIFEST);
  let manifest: ReleaseManifest;
  try {
    manifest = JSON.parse(readFileSync(file, "utf8")) as ReleaseManifest;
  } catch (err) {
    throw new CliError(`${file}: not a Keelson release manifest (${(err as Error).message})`);
  }
  if (manifest.format !== 1 || manifest.name !== "keelson" || typeof manifest.version !== "string")
    throw new CliError(`${file}: not a Keelson release manifest (format ${String(manifest.format)})`);
  return manifest;
}

/**
 * Checks every file of a release against its SHA256SUMS with sha256sum itself; throws naming the
 * files that differ or are missing.
 */
export function verifyRelease(dir: string): void {
  if (!existsSync(join(dir, RELEASE_SUMS))) throw new CliError(`${dir} has no ${RELEASE_SUMS}: not a release`);
  try {
    execFileSync("sha256sum", ["--check", "--quiet", "--strict", RELEASE_SUMS], { cwd: dir, stdio: "pipe" });
  } catch (err) {
    const out = `${String((err as { stdout?: Buffer }).stdout ?? "")}`;
    const bad = out
      .split("\n")
      .filter((l) => /: (FAILED|FAILED open or read)$/.test(l))
      .map((l) => l.replace(/: FAILED.*$/, ""));
    throw new CliError(
      `${dir} does not match its ${RELEASE_SUMS}: ${bad.slice(0, 5).join(", ") || out.trim() || "sha256sum failed"}${bad.length > 5 ? ` and ${bad.length - 5} more` : ""}`,
    );
  }
}
