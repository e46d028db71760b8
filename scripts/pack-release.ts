/**
 * `pnpm pack:release --version X [--out DIR] [--upgrades-from V] [--no-tarball]`: builds one
 * versioned Keelson release (docs in README "Installing the control plane") from the workspace:
 *
 *   <out>/keelson-<X>/
 *     manifest.json                 version, schema and protocol versions, what it upgrades from
 *     SHA256SUMS                    every file, in sha256sum's format (`sha256sum -c` checks it)
 *     packages/control-plane, db, protocol, settings, cli   sources, migrations, bin/
 *     packages/control-plane/dist/<digest>/  the server's bundle (packages/control-plane/bin/bundle.mjs)
 *     packages/console/dist         the web console's built files (served at /ui)
 *     node_modules/.pnpm/...        their production dependencies (scripts/lib/release-closure.ts)
 *     agent/keelson-agent-<X>.tar.gz  the agent package (pack-agent.ts)
 *     node-packages.json            the node package index: the catalogue's role versions and files
 *   <out>/keelson-<X>.tar.gz (+ .sha256)   the same directory packed, what `keelson download` fetches
 *
 * The control plane and the CLI run with `node packages/<name>/bin/*.mjs` from the release; the
 * copied package.json files carry the release's version, which is what `keelson-server` reports,
 * writes into backups and checks a database's keelson_schema against.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { RELEASE_MANIFEST, RELEASE_SUMS, type ReleaseManifest } from "../packages/cli/src/release/manifest.ts";
import { buildBundle } from "../packages/control-plane/bin/bundle.mjs";
import { PROTOCOL_VERSION } from "../packages/protocol/src/version.ts";
import { copyWorkspacePackages } from "./lib/release-closure.ts";
import { sha256, writePackageTarball } from "./lib/tarball.ts";
import { packAgent } from "./pack-agent.ts";

const repoRoot = resolve(import.meta.dirname, "..");
/** The workspace packages a release carries (the agent goes as its own package). */
const PACKAGES = ["control-plane", "db", "protocol", "settings", "cli"] as const;
const VERSION_PATTERN = /^[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+_-]{1,64})?$/;
export interface ReleaseResult {
  dir: string;
  tarball?: string;
  manifest: ReleaseManifest;
  seconds: { copy: number; agent: number; sums: number; tarball: number };
}

function migrations(folder: string): number {
  const journal = JSON.parse(readFileSync(join(repoRoot, "packages", "db", folder, "meta", "_journal.json"), "utf8"));
  return (journal.entries as unknown[]).length;
}

function filesUnder(dir: string, at = dir): string[] {
  return readdirSync(at, { withFileTypes: true }).flatMap((e) => {
    const full = join(at, e.name);
    if (e.isDirectory()) return filesUnder(dir, full);
    return e.isFile() ? [relative(dir, full).split(sep).join("/")] : [];
  });
}

/** SHA256SUMS of every regular file under `dir` (symlinks are the layout, their targets are hashed). */
export function writeSums(dir: string): void {
  const lines = filesUnder(dir)
    .filter((f) => f !== RELEASE_SUMS)
    .sort()
    .map((f) => `${sha256(readFileSync(join(dir, f)))}  ${f}`);
  writeFileSync(join(dir, RELEASE_SUMS), `${lines.join("\n")}\n`);
}

function setVersion(file: string, version: string): void {
  const json = JSON.parse(readFileSync(file, "utf8"));
  json.version = version;
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
}

function nodePackageIndex(): unknown {
  const catalogue = JSON.parse(
    readFileSync(join(repoRoot, "packages/control-plane/src/domain/catalogue/role-versions.json"), "utf8"),
  ) as { roleVersions: { roleVersion: string; kubernetesVersion: string; nodePackage: unknown }[] };
  return catalogue.roleVersions.map((r) => ({
    roleVersion: r.roleVersion,
    kubernetesVersion: r.kubernetesVersion,
    nodePackage: r.nodePackage,
  }));
}

export async function packRelease(options: {
  version: string;
  out?: string;
  upgradesFrom?: string;
  tarball?: boolean;
}): Promise<ReleaseResult> {
  const { version } = options;
  if (!VERSION_PATTERN.test(version))
    throw new Error(`--version must be MAJOR.MINOR.PATCH[-suffix] (got "${version}")`);
  const upgradesFrom = options.upgradesFrom ?? "0.1.0";
  if (!VERSION_PATTERN.test(upgradesFrom)) throw new Error(`--upgrades-from must be a version (got "${upgradesFrom}")`);
  const out = resolve(options.out ?? join(repoRoot, "dist", "release"));
  const name = `keelson-${version}`;
  const dir = join(out, name);
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const clock = () => performance.now() / 1000;
  const t0 = clock();
  copyWorkspacePackages(repoRoot, PACKAGES, partial);
  for (const p of PACKAGES) setVersion(join(partial, "packages", p, "package.json"), version);
  // What keelson-server runs, built from the release's own copy of the sources (bin/bundle.mjs).
  await buildBundle(join(partial, "packages", "control-plane"));
  // The web console the control plane serves at /ui: its built files only (routes/console.ts finds them there).
  const consoleDist = join(repoRoot, "packages", "console", "dist");
  if (!existsSync(join(consoleDist, "index.html")))
    throw new Error(`${consoleDist} is not built (scripts/ensure-deps.sh)`);
  cpSync(consoleDist, join(partial, "packages", "console", "dist"), { recursive: true });
  const t1 = clock();
  const agent = await packAgent({ version, out: join(partial, "agent") });
  writeFileSync(join(partial, "node-packages.json"), `${JSON.stringify(nodePackageIndex(), null, 2)}\n`);
  const manifest: ReleaseManifest = {
    format: 1,
    name: "keelson",
    version,
    schemaVersion: { sqlite: migrations("drizzle"), postgres: migrations("drizzle-pg") },
    protocolVersion: PROTOCOL_VERSION,
    upgradesFrom: { minimum: upgradesFrom },
    createdAt: new Date().toISOString(),
    entries: {
      server: "packages/control-plane/bin/keelson-server.mjs",
      cli: "packages/cli/bin/keelson.mjs",
      agentPackage: relative(partial, agent.file),
      nodePackages: "node-packages.json",
    },
  };
  writeFileSync(join(partial, RELEASE_MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  const t2 = clock();
  writeSums(partial);
  const t3 = clock();
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  let tarball: string | undefined;
  if (options.tarball !== false) {
    tarball = join(out, `${name}.tar.gz`);
    writePackageTarball(out, [name], tarball);
  }
  const t4 = clock();
  const round = (s: number) => Math.round(s * 100) / 100;
  return {
    dir,
    ...(tarball ? { tarball } : {}),
    manifest,
    seconds: { copy: round(t1 - t0), agent: round(t2 - t1), sums: round(t3 - t2), tarball: round(t4 - t3) },
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      version: { type: "string" },
      out: { type: "string" },
      "upgrades-from": { type: "string" },
      "no-tarball": { type: "boolean" },
    },
    allowPositionals: false,
  });
  if (!values.version) {
    process.stderr.write("usage: pnpm pack:release --version X [--out DIR] [--upgrades-from V] [--no-tarball]\n");
    process.exit(2);
  }
  const result = await packRelease({
    version: values.version,
    ...(values.out ? { out: values.out } : {}),
    ...(values["upgrades-from"] ? { upgradesFrom: values["upgrades-from"] } : {}),
    tarball: !values["no-tarball"],
  });
  const s = result.seconds;
  process.stderr.write(
    `keelson ${result.manifest.version}: copy ${s.copy} s, agent package ${s.agent} s, sums ${s.sums} s, tarball ${s.tarball} s\n`,
  );
  process.stdout.write(`${result.dir}\n${result.tarball ? `${result.tarball}\n` : ""}`);
}
