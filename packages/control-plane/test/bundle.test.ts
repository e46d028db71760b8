import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildBundle, readyBundle, sourcesDigest } from "../bin/bundle.mjs";

/**
 * bin/bundle.mjs on a workspace of two small packages laid out like this one: `app` (the entry
 * points, as src/main.ts and src/commands/main.ts) uses `@keelson/lib`, each reads a file beside its
 * sources through import.meta.url, and `lib` imports a third-party package that only it has.
 */
const WS = dirname(createRequire(import.meta.url).resolve("ws"));
let root: string;
let app: string;
let lib: string;

function write(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "keelson-bundle-"));
  app = join(root, "packages", "app");
  lib = join(root, "packages", "lib");
  write(
    join(app, "package.json"),
    JSON.stringify({ name: "app", version: "1.0.0", dependencies: { "@keelson/lib": "workspace:*" } }),
  );
  write(join(lib, "package.json"), JSON.stringify({ name: "@keelson/lib", exports: { ".": "./src/index.ts" } }));
  mkdirSync(join(app, "node_modules", "@keelson"), { recursive: true });
  symlinkSync(join("..", "..", "..", "lib"), join(app, "node_modules", "@keelson", "lib"));
  mkdirSync(join(lib, "node_modules"), { recursive: true });
  symlinkSync(WS, join(lib, "node_modules", "ws"));
  write(join(app, "note.txt"), "beside app");
  write(join(lib, "data", "note.txt"), "beside lib");
  write(
    join(lib, "src", "index.ts"),
    [
      'import { readFileSync } from "node:fs";',
      'import { WebSocket } from "ws";',
      'export const libNote: string = readFileSync(new URL("../data/note.txt", import.meta.url), "utf8");',
      "export const wsLoaded = typeof WebSocket;",
    ].join("\n"),
  );
  write(
    join(app, "src", "main.ts"),
    [
      'import { readFileSync } from "node:fs";',
      'import { libNote, wsLoaded } from "@keelson/lib";',
      'const appNote: string = readFileSync(new URL("../note.txt", import.meta.url), "utf8");',
      'const late = await import("./late.ts");',
      "console.log(JSON.stringify({ appNote, libNote, wsLoaded, late: late.value }));",
    ].join("\n"),
  );
  write(join(app, "src", "late.ts"), "export const value: number = 42;");
  write(join(app, "src", "commands", "main.ts"), 'console.log("commands");');
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("the server's bundle", () => {
  it("runs from dist/<digest>/ with every module finding its files, packages and lazy chunks", async () => {
    const dir = await buildBundle(app);
    expect(dir).toBe(join(app, "dist", sourcesDigest(app)));
    const out = JSON.parse(execFileSync(process.execPath, [join(dir, "server.mjs")], { encoding: "utf8" }));
    expect(out).toEqual({ appNote: "beside app", libNote: "beside lib", wsLoaded: "function", late: 42 });
    expect(execFileSync(process.execPath, [join(dir, "commands.mjs")], { encoding: "utf8" })).toBe("commands\n");
    // The lazy import is a chunk of its own, not code in the entry.
    expect(readdirSync(dir).some((f) => /^late-.*\.mjs$/.test(f))).toBe(true);
  });

  it("builds anew when a source of any workspace package changes, not when a version does", async () => {
    const first = await buildBundle(app);
    write(
      join(app, "package.json"),
      JSON.stringify({ name: "app", version: "2.0.0", dependencies: { "@keelson/lib": "*" } }),
    );
    expect(readyBundle(app)).toBe(first);
    write(join(lib, "src", "index.ts"), 'export const libNote = "changed"; export const wsLoaded = "no";');
    const second = readyBundle(app);
    expect(second).not.toBe(first);
    expect(JSON.parse(execFileSync(process.execPath, [join(second, "server.mjs")], { encoding: "utf8" })).libNote).toBe(
      "changed",
    );
  });

  it("gives two builds of the same sources at once one complete folder", async () => {
    const [a, b] = await Promise.all([buildBundle(app), buildBundle(app)]);
    expect(a).toBe(b);
    expect(existsSync(join(a, "server.mjs"))).toBe(true);
    expect(readdirSync(join(app, "dist"))).toEqual([sourcesDigest(app)]);
  });

  it("refuses import.meta.dirname, which would name the bundle's folder instead of the source's", async () => {
    write(join(app, "src", "late.ts"), "export const value = import.meta.dirname.length;");
    await expect(buildBundle(app)).rejects.toThrow(/use import\.meta\.url/);
    expect(readdirSync(join(app, "dist"))).toEqual([]);
  });
});
