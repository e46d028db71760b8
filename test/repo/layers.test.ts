import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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
});
