import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * Agent packages for tests, built with the real tar: a manifest and the files it lists, with
 * knobs to break one thing at a time.
 */
export interface FakePackage {
  file: string;
  url: string;
  sha256: string;
}

export interface FakePackageOptions {
  version: string;
  /** Files besides manifest.json; default an entry that does nothing. */
  files?: Record<string, string>;
  entry?: string;
  /** Applied to the manifest after it is computed (to break it). */
  editManifest?: (manifest: Record<string, unknown>) => void;
  /** Written raw instead of a JSON manifest. */
  rawManifest?: string;
  /** Files placed in the tarball but left out of the manifest. */
  unlisted?: Record<string, string>;
  /** Leave manifest.json out of the tarball. */
  noManifest?: boolean;
  /** Write `<file>.sha256` beside the package (default true). */
  sidecar?: boolean;
}

export const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");

export function tempRoot(prefix = "keelson-agent-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function makePackage(outDir: string, options: FakePackageOptions): FakePackage {
  const entry = options.entry ?? "agent.mjs";
  const files = options.files ?? { [entry]: "process.exit(0);\n" };
  const staging = mkdtempSync(join(tmpdir(), "keelson-fake-pkg-"));
  try {
    const hashes: Record<string, string> = {};
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(staging, path)), { recursive: true });
      writeFileSync(join(staging, path), content);
      hashes[path] = sha256(content);
    }
    for (const [path, content] of Object.entries(options.unlisted ?? {})) {
      mkdirSync(dirname(join(staging, path)), { recursive: true });
      writeFileSync(join(staging, path), content);
    }
    const manifest: Record<string, unknown> = {
      format: 1,
      name: "keelson-agent",
      version: options.version,
      entry,
      nodeMajor: 20,
      createdAt: new Date().toISOString(),
      files: hashes,
    };
    options.editManifest?.(manifest);
    if (!options.noManifest) {
      writeFileSync(join(staging, "manifest.json"), options.rawManifest ?? JSON.stringify(manifest));
    }
    mkdirSync(outDir, { recursive: true });
    const file = join(outDir, `keelson-agent-${options.version}-${Math.random().toString(36).slice(2, 8)}.tar.gz`);
    execFileSync("tar", ["-czf", file, "-C", staging, "."]);
    const digest = sha256(readFileSync(file));
    if (options.sidecar !== false) writeFileSync(`${file}.sha256`, `${digest}  package.tar.gz\n`);
    return { file, url: pathToFileURL(file).href, sha256: digest };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
