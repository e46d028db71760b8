import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { packAgent } from "../../../scripts/pack-agent.ts";
import { verifyPackageDir } from "../src/upgrade/manifest.ts";
import { unpackTarball } from "../src/upgrade/unpack.ts";
import { sha256, tempRoot } from "./package-fixtures.ts";

const root = tempRoot("keelson-pack-test-");
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("pnpm pack:agent", () => {
  it("builds a package that verifies and runs with plain node, reporting its version", async () => {
    const result = await packAgent({ version: "9.8.7-test", out: join(root, "out") });
    expect(result.file).toBe(join(root, "out", "keelson-agent-9.8.7-test.tar.gz"));
    expect(result.sha256).toBe(sha256(readFileSync(result.file)));
    expect(readFileSync(`${result.file}.sha256`, "utf8")).toBe(`${result.sha256}  keelson-agent-9.8.7-test.tar.gz\n`);

    const dir = join(root, "unpacked");
    execFileSync("mkdir", ["-p", dir]);
    await unpackTarball(result.file, dir);
    const manifest = await verifyPackageDir(dir, "9.8.7-test");
    expect(manifest).toMatchObject({ name: "keelson-agent", version: "9.8.7-test", entry: "agent.mjs", nodeMajor: 20 });
    // The node bouncer is a separate program the phases supervise; it ships beside the agent, and
    // so do the launcher and the unit a host installed from the package runs (install script).
    expect(Object.keys(manifest.files).sort()).toEqual([
      "agent-package.md",
      "agent.mjs",
      "keelson-agent.service",
      "launcher.mjs",
      "node-bouncer.mjs",
    ]);
    const unit = readFileSync(join(dir, "keelson-agent.service"), "utf8");
    expect(unit).toContain("ExecStart=/usr/bin/env node /opt/keelson/agent/current/launcher.mjs");
    // The unit's Documentation= names a file the installed package holds.
    const documented = /^Documentation=file:\/\/\/opt\/keelson\/agent\/current\/(.+)$/m.exec(unit)?.[1];
    expect(documented).toBe("agent-package.md");
    expect(readFileSync(join(dir, documented as string), "utf8")).toMatch(/^# /);

    // The bundle carries every dependency: it runs from a directory without node_modules.
    const entry = join(dir, manifest.entry);
    expect(execFileSync(process.execPath, [entry, "--version"], { cwd: dir, encoding: "utf8" })).toBe("9.8.7-test\n");
    const unconfigured = spawnSync(process.execPath, [entry], {
      cwd: dir,
      encoding: "utf8",
      env: { PATH: process.env.PATH },
    });
    expect(unconfigured.status).toBe(78);
    expect(unconfigured.stdout).toContain("KEELSON_CONTROL_PLANE is required");

    // The packed launcher runs the agent beside it (no workspace, no tsx) and exits with its code.
    const launched = spawnSync(process.execPath, [join(dir, "launcher.mjs")], {
      cwd: dir,
      encoding: "utf8",
      env: { PATH: process.env.PATH, KEELSON_STATE_DIR: join(root, "launcher-state") },
    });
    expect(launched.status).toBe(78);
    expect(launched.stdout).toContain("KEELSON_CONTROL_PLANE is required");
  }, 60_000);

  it("refuses a version that cannot be a directory name", async () => {
    await expect(packAgent({ version: "../x", out: join(root, "bad") })).rejects.toThrow(/--version/);
  });
});
