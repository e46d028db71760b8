/**
 * The control plane's bundle: what `keelson-server` runs (bin/keelson-server.mjs).
 *
 * Why a bundle: run through tsx, an idle server held about 50 MiB more than it needs (tsx's
 * loader, the transpiled sources and their maps, and some 300 workspace modules loaded one by
 * one), and that idle size was the whole gap to a bare `ws` server in the agent-hub benchmark
 * (issue 18). esbuild bundles this package's TypeScript and the @keelson packages it uses into ES
 * modules; third-party packages stay outside and load from node_modules as before (better-sqlite3
 * is native, some read files beside their code, the cloud SDKs load only when used), and every
 * `import()` stays lazy (code splitting).
 *
 * The bundle lives in dist/<digest>/, named after the sources' content, so a start whose sources
 * changed builds anew (about a second, in a child process so the server never holds esbuild) and
 * a start with unchanged sources runs what is there. A release ships its bundle
 * (scripts/pack-release.ts). Plain JavaScript: it runs before anything can load TypeScript.
 */
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const THIS_FILE = fileURLToPath(import.meta.url);
/** The entry points, by output name: the server, and its operator commands (src/commands/main.ts). */
const ENTRIES = { server: "src/main.ts", commands: "src/commands/main.ts" };
/**
 * Third-party packages bundled in all the same: ES modules only, reading no files beside their
 * code, and many files each (typebox 683, drizzle 149). Node's ES module loader reads a graph's
 * files all at once, and left outside these two alone opened more files together than a server
 * under a 256 open-file limit has (test/e2e/open-files.test.ts).
 */
const BUNDLED_PACKAGES = new Set(["typebox", "drizzle-orm"]);
/** Bundles kept beside the newest: a running server may still load a lazy chunk of its own. */
const KEEP_BUNDLES = 3;

/** The workspace packages the bundle holds: this one and the @keelson packages it reaches. */
function workspacePackages(packageDir) {
  const found = new Set();
  const visit = (dir) => {
    const real = realpathSync(dir);
    if (found.has(real)) return;
    found.add(real);
    const manifest = JSON.parse(readFileSync(join(real, "package.json"), "utf8"));
    for (const name of Object.keys(manifest.dependencies ?? {}))
      if (name.startsWith("@keelson/")) visit(join(real, "node_modules", name));
  };
  visit(packageDir);
  return [...found];
}

function filesUnder(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = join(dir, e.name);
    return e.isDirectory() ? filesUnder(full) : e.isFile() ? [full] : [];
  });
}

/**
 * The digest of what goes into the bundle: every file under the workspace packages' `src`, named
 * relative to the packages' folder (the same in a checkout and in a release), and this file (the
 * build's options). package.json is left out: a release rewrites its version after building.
 */
export function sourcesDigest(packageDir) {
  const dirs = workspacePackages(packageDir);
  const base = dirname(realpathSync(packageDir));
  const hash = createHash("sha256").update(readFileSync(THIS_FILE));
  const files = dirs.flatMap((d) => filesUnder(join(d, "src"))).map((f) => [relative(base, f).split(sep).join("/"), f]);
  files.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [name, file] of files) hash.update(`${name}\0`).update(readFileSync(file)).update("\0");
  return hash.digest("hex").slice(0, 16);
}

/**
 * The bundle of `packageDir`'s current sources, built first when there is none. Synchronous: it
 * runs before the server's first import.
 */
export function readyBundle(packageDir) {
  const dir = join(packageDir, "dist", sourcesDigest(packageDir));
  if (existsSync(dir)) return dir;
  const built = spawnSync(process.execPath, [THIS_FILE, packageDir], { stdio: ["ignore", "ignore", "inherit"] });
  if (built.status !== 0 || !existsSync(dir))
    throw new Error(`keelson-server: building its bundle into ${dir} failed (esbuild's message is above)`);
  return dir;
}

/** `name` of a bare specifier: `pkg/sub` → `pkg`, `@scope/pkg/sub` → `@scope/pkg`. */
function packageName(specifier) {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** Node's lookup of a package's folder from `fromDir`: the nearest node_modules/<name> upwards. */
function findPackageDir(name, fromDir) {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * Third-party imports stay imports, those of BUNDLED_PACKAGES aside. Each package is linked into the bundle's own node_modules as
 * its importer found it (pnpm gives each workspace package only its own dependencies, and the
 * bundle's code comes from several), so one name must be one package across them all.
 */
function externalPackages(links) {
  return {
    name: "keelson-external-packages",
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("node:") || builtinModules.includes(args.path)) return { external: true };
        const name = packageName(args.path);
        if (name.startsWith("@keelson/") || BUNDLED_PACKAGES.has(name)) return undefined;
        const dir = findPackageDir(name, args.resolveDir);
        if (!dir) return { errors: [{ text: `${name} is not installed for ${args.importer}` }] };
        const seen = links.get(name);
        if (seen && realpathSync(seen) !== realpathSync(dir))
          return { errors: [{ text: `${name} is two packages: ${realpathSync(seen)} and ${realpathSync(dir)}` }] };
        links.set(name, dir);
        return { external: true };
      });
    },
  };
}

/**
 * Every module keeps its own location: `import.meta.url` becomes the source file's URL, reached
 * from the bundle's, so paths next to the sources (migrations, the install script, the
 * catalogue, package.json) resolve as they do from the sources. The bundle is flat (every output
 * file directly in `outdir`), so one relative path serves every chunk.
 */
function ownLocation(outdir) {
  return {
    name: "keelson-own-location",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        const text = readFileSync(args.path, "utf8");
        if (/import\.meta\.(dirname|filename)\b/.test(text))
          return {
            errors: [
              { text: `${args.path}: use import.meta.url (bin/bundle.mjs rewrites it to the source's location)` },
            ],
          };
        const url = JSON.stringify(relative(outdir, args.path).split(sep).join("/"));
        return { contents: text.replaceAll("import.meta.url", `new URL(${url}, import.meta.url).href`), loader: "ts" };
      });
    },
  };
}

/** Builds the bundle of `packageDir`'s sources into dist/<digest>/ (a complete folder or none). */
export async function buildBundle(packageDir) {
  const { build } = await import("esbuild");
  const root = realpathSync(packageDir);
  const dist = join(root, "dist");
  const final = join(dist, sourcesDigest(root));
  if (existsSync(final)) return final;
  const staging = join(dist, `.build-${process.pid}-${randomBytes(4).toString("hex")}`);
  mkdirSync(staging, { recursive: true });
  try {
    const links = new Map();
    await build({
      entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, join(root, file)])),
      outdir: staging,
      bundle: true,
      splitting: true,
      format: "esm",
      // ES modules whatever the package.json around them says.
      outExtension: { ".js": ".mjs" },
      platform: "node",
      target: "node20",
      // Error names and stack frames read as in the sources.
      keepNames: true,
      sourcemap: "linked",
      sourcesContent: false,
      legalComments: "none",
      logLevel: "error",
      plugins: [externalPackages(links), ownLocation(staging)],
    });
    for (const [name, dir] of links) {
      const link = join(staging, "node_modules", name);
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(relative(dirname(link), dir), link);
    }
    try {
      renameSync(staging, final);
    } catch (error) {
      // Another start built the same sources first: theirs is the same bundle.
      if (!existsSync(final)) throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  pruneOlder(dist, final);
  return final;
}

/** A build older than this whose folder is still a staging one was cut off (a killed start). */
const ABANDONED_BUILD_MS = 10 * 60_000;

function pruneOlder(dist, newest) {
  const entries = readdirSync(dist).map((name) => ({
    name,
    dir: join(dist, name),
    at: statSync(join(dist, name)).mtimeMs,
  }));
  for (const { name, dir, at } of entries)
    if (name.startsWith(".build-") && Date.now() - at > ABANDONED_BUILD_MS)
      rmSync(dir, { recursive: true, force: true });
  const others = entries.filter(({ name, dir }) => !name.startsWith(".") && dir !== newest).sort((a, b) => b.at - a.at);
  for (const { dir } of others.slice(KEEP_BUNDLES - 1)) rmSync(dir, { recursive: true, force: true });
}

if (process.argv[1] && resolve(process.argv[1]) === THIS_FILE) {
  const packageDir = process.argv[2] ?? resolve(dirname(THIS_FILE), "..");
  try {
    await buildBundle(packageDir);
  } catch (error) {
    // esbuild printed its errors already (logLevel "error").
    if (!(error instanceof Error && "errors" in error)) console.error(error);
    process.exit(1);
  }
}
