/**
 * `pnpm pack:agent [--version X] [--out DIR]`: builds an agent package (docs/agent-package.md)
 * from the workspace: packages/agent and packages/protocol with every runtime dependency,
 * bundled by esbuild into one ES module, plus manifest.json, as
 * `<out>/keelson-agent-<version>.tar.gz` with `<file>.sha256` beside it.
 *
 * Why a bundle: the package must run on a host with nothing but node. Copying the sources
 * would also need tsx at run time and a node_modules tree; pnpm's is a web of symlinks into
 * its store that cannot be copied piecemeal. One bundled file has no resolution to get wrong,
 * is a few MiB, and starts faster than tsx compiling TypeScript. The cost is a build step for
 * packages only (development keeps running the sources) and stack traces that point into the
 * bundle (it is not minified, so they stay readable).
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { sha256, writePackageTarball } from "./lib/tarball.ts";

const repoRoot = resolve(import.meta.dirname, "..");
const agentDir = join(repoRoot, "packages", "agent");
const ENTRY = "agent.mjs";
/** The node bouncer runs as its own supervised process; a packed agent has no tsx to run its sources. */
const BOUNCER = "node-bouncer.mjs";
/**
 * A host installed by `GET /v1/install/agent.sh` runs the package itself: the launcher (the same
 * supervisor as bin/keelson-agent.mjs, running the agent beside it) and the systemd unit that
 * starts it, so the unit always matches the package's layout.
 */
const LAUNCHER = "launcher.mjs";
const UNIT = "keelson-agent.service";
/** The package's own documentation, which the unit's Documentation= names on an installed host. */
const DOC = "agent-package.md";

export interface PackResult {
  file: string;
  sha256: string;
  version: string;
}

export async function packAgent(options: { version?: string; out?: string } = {}): Promise<PackResult> {
  const version =
    options.version ?? (JSON.parse(readFileSync(join(agentDir, "package.json"), "utf8")).version as string);
  if (!/^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/.test(version)) {
    throw new Error(`--version must be letters, digits and . + _ - (got "${version}")`);
  }
  const out = resolve(options.out ?? join(repoRoot, "dist", "agent"));
  mkdirSync(out, { recursive: true });
  const staging = mkdtempSync(join(tmpdir(), "keelson-pack-"));
  try {
    await bundle(join(agentDir, "src", "main.ts"), join(staging, ENTRY), version);
    await bundle(join(agentDir, "src", "phases", "bouncer", "server.ts"), join(staging, BOUNCER), version);
    await bundle(join(agentDir, "src", "upgrade", "packed-launcher.ts"), join(staging, LAUNCHER), version);
    copyFileSync(join(repoRoot, "scripts", UNIT), join(staging, UNIT));
    copyFileSync(join(repoRoot, "docs", DOC), join(staging, DOC));
    const files = [ENTRY, BOUNCER, LAUNCHER, UNIT, DOC];
    const manifest = {
      format: 1,
      name: "keelson-agent",
      version,
      entry: ENTRY,
      nodeMajor: 20,
      createdAt: new Date().toISOString(),
      files: Object.fromEntries(files.map((f) => [f, sha256(readFileSync(join(staging, f)))])),
    };
    writeFileSync(join(staging, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    const file = join(out, `keelson-agent-${version}.tar.gz`);
    const digest = writePackageTarball(staging, ["manifest.json", ...files], file);
    return { file, sha256: digest, version };
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

async function bundle(entry: string, outfile: string, version: string): Promise<void> {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // CommonJS dependencies call require(); an ES module has none unless we make one.
    banner: {
      js: 'import { createRequire as __keelsonRequire } from "node:module";\nconst require = __keelsonRequire(import.meta.url);',
    },
    define: { __KEELSON_AGENT_VERSION__: JSON.stringify(version) },
    legalComments: "none",
    logLevel: "warning",
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { version: { type: "string" }, out: { type: "string" } },
    allowPositionals: false,
  });
  const result = await packAgent({
    ...(values.version ? { version: values.version } : {}),
    ...(values.out ? { out: values.out } : {}),
  });
  process.stdout.write(`${result.file}\nsha256 ${result.sha256}\n`);
}
