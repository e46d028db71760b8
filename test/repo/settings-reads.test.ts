import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * The only places that may touch `process.env`, each with the reason. Settings are parsed once
 * by the binaries' main modules (and the launcher) and passed down; everything else gets them
 * as arguments.
 */
const ALLOWED: Record<string, string> = {
  "packages/control-plane/src/main.ts": "parses the server's settings once",
  "packages/control-plane/src/commands/main.ts": "parses the server's settings once, for its commands",
  "packages/agent/src/main.ts": "parses the agent's settings once",
  "packages/cli/src/main.ts": "hands the environment to the CLI's settings parser once",
  "packages/agent/bin/keelson-agent.mjs": "the launcher parses its part and passes the environment on to the agent",
  "packages/agent/src/upgrade/packed-launcher.ts": "the packed launcher: the same, for a host installed from a package",
  "packages/cli/bin/keelson-supervise.mjs": "passes its PATH on to keelson-server, as systemd gives a unit one",
  "packages/settings/src/index.ts": "names process.env in its module comment only",
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === "node_modules") return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(ts|mts|mjs|js)$/.test(name) ? [path] : [];
  });
}

describe("settings are read in one place per binary", () => {
  it("no source file outside the settings entry points reads process.env", () => {
    const packages = join(ROOT, "packages");
    const files = readdirSync(packages).flatMap((pkg) =>
      ["src", "bin"].flatMap((dir) => {
        const path = join(packages, pkg, dir);
        try {
          return sources(path);
        } catch {
          return [];
        }
      }),
    );
    expect(files.length).toBeGreaterThan(100);
    const readers = files
      .filter((file) => readFileSync(file, "utf8").includes("process.env"))
      .map((file) => relative(ROOT, file))
      .sort();
    expect(readers).toEqual(Object.keys(ALLOWED).sort());
  });
});
