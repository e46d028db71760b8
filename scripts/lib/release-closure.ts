import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { dirname, join, relative, sep } from "node:path";

/**
 * Copies workspace packages with their production dependencies into a release directory, in
 * pnpm's own layout: `packages/<name>` (sources, with their `node_modules` of relative symlinks)
 * and `node_modules/.pnpm/<key>` (each dependency's real files and its own symlinks). Because
 * every symlink pnpm makes is relative, the copy resolves exactly as the workspace does, with
 * no registry and no install step.
 *
 * Why not `pnpm deploy`: it resolves metadata from the registry (a test must not reach it), takes
 * about 7 s and writes 100 MB per package; this copies only the closure of what the packages
 * import, once for all of them.
 */

interface PackageJson {
  name: string;
  dependencies?: Record<string, string>;
}

/** What a workspace package's directory holds that a release needs (no tests, no dev files). */
const PACKAGE_ENTRIES = ["package.json", "bin", "src", "drizzle", "drizzle-pg"];

/**
 * What a native module's install left that it never loads at run time: better-sqlite3's C
 * sources and intermediate objects are 30 of its 32 MB; it loads build/Release/better_sqlite3.node.
 */
const BUILD_LEFTOVERS: Record<string, string[]> = {
  "better-sqlite3@": [
    "deps",
    "src",
    "build/Release/obj",
    "build/Release/obj.target",
    "build/Release/sqlite3.a",
    "build/Release/test_extension.node",
    "build/deps",
  ],
};

/**
 * Files no dependency loads at run time: type declarations, source maps and documents. They are
 * half of the closure's 9,000 files, and every file costs at each copy, check and removal.
 */
const NOT_RUN = /\.(d\.ts|d\.mts|d\.cts|map|md|markdown)$/i;

function readPackageJson(dir: string): PackageJson {
  return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson;
}

/** `.pnpm/<key>` of a path inside the virtual store, or undefined for a workspace package. */
function storeKey(storeDir: string, real: string): string | undefined {
  const rel = relative(storeDir, real);
  if (rel.startsWith("..")) return undefined;
  return rel.split(sep)[0];
}

/**
 * Copies `packages` (directory names under `<repoRoot>/packages`) and every store entry their
 * production dependencies reach into `out`. Returns the store keys copied.
 */
export function copyWorkspacePackages(repoRoot: string, packages: readonly string[], out: string): string[] {
  const storeDir = join(repoRoot, "node_modules", ".pnpm");
  const keys = new Set<string>();
  const queue: string[] = [];
  const reach = (link: string) => {
    const key = storeKey(storeDir, realpathSync(link));
    // Type packages are for the compiler; tsx strips types without reading them.
    if (key !== undefined && !key.startsWith("@types+") && !keys.has(key)) {
      keys.add(key);
      queue.push(key);
    }
  };
  for (const name of packages) {
    const from = join(repoRoot, "packages", name);
    const to = join(out, "packages", name);
    mkdirSync(to, { recursive: true });
    for (const entry of PACKAGE_ENTRIES) {
      if (existsSync(join(from, entry))) cpSync(join(from, entry), join(to, entry), { recursive: true });
    }
    // Only the production dependencies' links: a dev dependency's link would dangle.
    for (const dep of Object.keys(readPackageJson(from).dependencies ?? {})) {
      const link = join(from, "node_modules", dep);
      const target = join(to, "node_modules", dep);
      mkdirSync(dirname(target), { recursive: true });
      symlinkSync(readlinkSync(link), target);
      if (!dep.startsWith("@keelson/")) reach(link);
    }
  }
  // A store entry's node_modules holds the package and links to its own dependencies.
  while (queue.length > 0) {
    const key = queue.pop() as string;
    const modules = join(storeDir, key, "node_modules");
    for (const entry of scopedEntries(modules)) {
      const at = join(modules, entry);
      if (lstatSync(at).isSymbolicLink() && existsSync(at)) reach(at);
    }
  }
  for (const key of keys) {
    const to = join(out, "node_modules", ".pnpm", key);
    cpSync(join(storeDir, key), to, { recursive: true, verbatimSymlinks: true, filter: (src) => !NOT_RUN.test(src) });
    for (const [prefix, paths] of Object.entries(BUILD_LEFTOVERS)) {
      if (!key.startsWith(prefix)) continue;
      for (const p of paths) rmSync(join(to, "node_modules", prefix.slice(0, -1), p), { recursive: true, force: true });
    }
  }
  return [...keys].sort();
}

/** A package's entries, scopes opened (`@scope/name`). */
function scopedEntries(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) =>
    name.startsWith("@")
      ? readdirSync(join(dir, name)).map((inner) => `${name}/${inner}`)
      : name === ".bin"
        ? []
        : [name],
  );
}
