/**
 * `pnpm pack:node --from DIR --role-version V [--kubernetes-version K] [--out DIR]`: builds a
 * node package (docs/node-package.md) from a directory laid out like one (`bin/<binary>` and
 * support files, and a source `manifest.json` naming the binaries), as
 * `<out>/keelson-node-<roleVersion>.tar.gz` with `<file>.sha256` beside it. The written
 * manifest lists every file with its sha256, which agents and the control plane check.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ROLE_VERSION_PATTERN } from "../packages/protocol/src/node-package.ts";
import { sha256, writePackageTarball } from "./lib/tarball.ts";

const repoRoot = resolve(import.meta.dirname, "..");

export interface NodePackOptions {
  from: string;
  roleVersion: string;
  kubernetesVersion?: string;
  out?: string;
}

export interface NodePackResult {
  file: string;
  sha256: string;
  roleVersion: string;
}

interface SourceManifest {
  kubernetesVersion?: string;
  note?: string;
  binaries?: Record<string, { kind: "real" | "stand-in"; source: string; version: string }>;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const full = join(current, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) out.push(relative(dir, full).split(sep).join("/"));
      else throw new Error(`${full} is not a regular file; a node package holds only files`);
    }
  };
  walk(dir);
  return out.sort();
}

export function packNode(options: NodePackOptions): NodePackResult {
  const { roleVersion } = options;
  if (!new RegExp(ROLE_VERSION_PATTERN).test(roleVersion)) {
    throw new Error(`--role-version must be letters, digits and . + _ - (got "${roleVersion}")`);
  }
  const from = resolve(options.from);
  let source: SourceManifest = {};
  try {
    source = JSON.parse(readFileSync(join(from, "manifest.json"), "utf8")) as SourceManifest;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const kubernetesVersion = options.kubernetesVersion ?? source.kubernetesVersion;
  if (!kubernetesVersion)
    throw new Error("--kubernetes-version is required when the source has no manifest.json naming it");
  const out = resolve(options.out ?? join(repoRoot, "dist", "node"));
  mkdirSync(out, { recursive: true });
  const staging = mkdtempSync(join(tmpdir(), "keelson-pack-node-"));
  try {
    const files = filesUnder(from).filter((f) => f !== "manifest.json");
    for (const f of files) cpSync(join(from, f), join(staging, f), { preserveTimestamps: true });
    const manifest = {
      format: 1,
      name: "keelson-node",
      roleVersion,
      kubernetesVersion,
      createdAt: new Date().toISOString(),
      binaries: source.binaries ?? {},
      ...(source.note ? { note: source.note } : {}),
      files: Object.fromEntries(files.map((f) => [f, sha256(readFileSync(join(staging, f)))])),
    };
    writeFileSync(join(staging, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    const file = join(out, `keelson-node-${roleVersion}.tar.gz`);
    const digest = writePackageTarball(
      staging,
      ["manifest.json", ...new Set(files.map((f) => f.split("/")[0] as string))],
      file,
    );
    return { file, sha256: digest, roleVersion };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      from: { type: "string" },
      "role-version": { type: "string" },
      "kubernetes-version": { type: "string" },
      out: { type: "string" },
    },
    allowPositionals: false,
  });
  if (!values.from || !values["role-version"]) {
    process.stderr.write("usage: pnpm pack:node --from DIR --role-version V [--kubernetes-version K] [--out DIR]\n");
    process.exit(2);
  }
  const result = packNode({
    from: values.from,
    roleVersion: values["role-version"],
    ...(values["kubernetes-version"] ? { kubernetesVersion: values["kubernetes-version"] } : {}),
    ...(values.out ? { out: values.out } : {}),
  });
  process.stdout.write(`${result.file}\nsha256 ${result.sha256}\n`);
}
