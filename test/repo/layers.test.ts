import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "..", "packages", "control-plane", "src");

function importsOf(dir: string): { file: string; spec: string }[] {
  return readdirSync(join(SRC, dir), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".ts"))
    .flatMap((name) => {
      const text = readFileSync(join(SRC, dir, name), "utf8");
      return [...text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((m) => ({
        file: `${dir}/${name}`,
        spec: m[1] as string,
      }));
    });
}

describe("control-plane layers", () => {
  it("the agent link transport (agents/) reaches the domain only through its LinkDomain interface", () => {
    const imports = importsOf("agents");
    expect(imports.length).toBeGreaterThan(20);
    expect(imports.filter(({ spec }) => /(^|\/)domain\//.test(spec))).toEqual([]);
  });

  it("the operation runner (runner/) knows no domain module: the kinds are registered where the app is assembled", () => {
    const imports = importsOf("runner");
    expect(imports.length).toBeGreaterThan(3);
    expect(imports.filter(({ spec }) => /(^|\/)domain\//.test(spec))).toEqual([]);
  });

  it("the server loads no cloud SDK module at start: its static imports from main.ts reach none (each cloud's load.ts loads it on use)", () => {
    const { files, packages } = staticImports(join(SRC, "main.ts"));
    expect(files.size).toBeGreaterThan(100);
    expect([...packages].filter((p) => p.startsWith("fastify")).length).toBeGreaterThan(0);
    const cloudSdk = /^(@aws-sdk\/|@azure\/|@google-cloud\/|google-auth-library$|google-gax$)/;
    expect([...packages].filter((p) => cloudSdk.test(p))).toEqual([]);
  });
});

describe("benchmarks", () => {
  // `pnpm bench NAME` runs test/bench/NAME/run.ts with plain node: a module that imports vitest
  // (as test support for the test run's PostgreSQL server does) fails there at load.
  const BENCH = join(import.meta.dirname, "..", "bench");
  const entries = readdirSync(BENCH).filter((name) => existsSync(join(BENCH, name, "run.ts")));

  it.each(entries)("pnpm bench %s reaches no vitest module", (name) => {
    const { files, packages } = staticImports(join(BENCH, name, "run.ts"));
    expect(files.size).toBeGreaterThan(1);
    expect([...packages].filter((p) => p === "vitest" || p.startsWith("vitest/"))).toEqual([]);
  });
});

/** The files `entry` reaches through static relative imports, and the packages they import. */
function staticImports(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    // Type-only imports are erased; `import("...")` is a load on use, not at start.
    const text = readFileSync(file, "utf8").replace(/^import type [^;]+;/gm, "");
    for (const m of text.matchAll(/^(?:import|export)\s[^;]*?from\s*"([^"]+)"|^import\s*"([^"]+)"/gm)) {
      const spec = (m[1] ?? m[2]) as string;
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec));
      else packages.add(spec);
    }
  };
  visit(entry);
  return { files, packages };
}
