import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { StateDir } from "../src/state-dir.ts";
import { readUpgradeOutcome } from "../src/upgrade/status.ts";
import { runSupervisor } from "../src/upgrade/supervisor.ts";
import { VersionStore } from "../src/upgrade/versions.ts";
import { tempRoot } from "./package-fixtures.ts";

const log = pino({ level: "silent" });
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * Stand-ins for agent versions: small scripts that append what they do to a journal file, so
 * a test can read back which version ran, in which order, and how it ended.
 */
type Behaviour = "ready-then-exit" | "crash" | "silent" | "restart-once";
function script(behaviour: Behaviour, name: string, journal: string): string {
  const note = (what: string) =>
    `appendFileSync(${JSON.stringify(journal)}, ${JSON.stringify(`${name} `)} + ${what} + "\\n");`;
  const lines = [
    'import { appendFileSync, existsSync, writeFileSync } from "node:fs";',
    note('"started"'),
    `process.on("SIGTERM", () => { ${note('"sigterm"')} process.exit(0); });`,
    `process.on("disconnect", () => { ${note('"orphaned"')} process.exit(0); });`,
  ];
  if (behaviour === "ready-then-exit") {
    lines.push(
      `process.send({ type: "keelson-agent.ready", version: ${JSON.stringify(name)} });`,
      "setTimeout(() => process.exit(0), 150);",
    );
  } else if (behaviour === "crash") {
    lines.push("process.exit(1);");
  } else if (behaviour === "silent") {
    lines.push("setInterval(() => {}, 1000);");
  } else {
    // Asks for a restart the first time, exits cleanly the second.
    const flag = `${journal}.restarted`;
    lines.push(
      `if (!existsSync(${JSON.stringify(flag)})) { writeFileSync(${JSON.stringify(flag)}, ""); process.exit(75); }`,
      "process.exit(0);",
    );
  }
  return `${lines.join("\n")}\n`;
}

function setup() {
  const root = tempRoot("keelson-supervisor-");
  dirs.push(root);
  const stateDir = new StateDir(join(root, "state")).ensure();
  const versions = new VersionStore(stateDir.path("versions")).ensure();
  const journal = join(root, "journal.log");
  writeFileSync(journal, "");
  const install = (version: string, behaviour: Behaviour) => {
    const dir = join(versions.dir, version);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "agent.mjs"), script(behaviour, version, journal));
    writeFileSync(join(dir, "manifest.json"), JSON.stringify({ name: "keelson-agent", version, entry: "agent.mjs" }));
  };
  const workspace = (behaviour: Behaviour) => {
    const file = join(root, "workspace.mjs");
    writeFileSync(file, script(behaviour, "workspace", journal));
    return { command: process.execPath, args: [file] };
  };
  const journalLines = () => readFileSync(journal, "utf8").trim().split("\n").filter(Boolean);
  return { root, stateDir, versions, journal, install, workspace, journalLines };
}

describe("launcher", () => {
  it("runs the workspace sources when no version is installed, and exits with the agent's code", async () => {
    const t = setup();
    const code = await runSupervisor({
      argv: [],
      env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root },
      log,
      workspaceCommand: t.workspace("crash"),
    });
    expect(code).toBe(1);
    expect(t.journalLines()).toEqual(["workspace started"]);
  });

  it("starts the agent again when it exits asking for a restart", async () => {
    const t = setup();
    const code = await runSupervisor({
      argv: [],
      env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root },
      log,
      workspaceCommand: t.workspace("restart-once"),
    });
    expect(code).toBe(0);
    expect(t.journalLines()).toEqual(["workspace started", "workspace started"]);
  });

  it("keeps a new version that reports ready, and records the success", async () => {
    const t = setup();
    t.install("1.0.0", "ready-then-exit");
    t.install("2.0.0", "ready-then-exit");
    t.versions.switchTo("1.0.0");
    t.versions.clearTrial();
    t.versions.switchTo("2.0.0");
    const code = await runSupervisor({
      argv: [],
      env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root },
      log,
      trialMs: 10_000,
    });
    expect(code).toBe(0);
    expect(t.journalLines()).toEqual(["2.0.0 started"]);
    expect(readlinkSync(t.versions.currentLink)).toBe("2.0.0");
    expect(t.versions.readTrial()).toBeUndefined();
    expect(readUpgradeOutcome(t.stateDir)).toMatchObject({ state: "succeeded", version: "2.0.0", from: "1.0.0" });
  });

  it("rolls back to the previous version when the new one crashes before it is up", async () => {
    const t = setup();
    t.install("1.0.0", "ready-then-exit");
    t.install("2.0.0", "crash");
    t.versions.switchTo("1.0.0");
    t.versions.clearTrial();
    t.versions.switchTo("2.0.0");
    const code = await runSupervisor({
      argv: [],
      env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root },
      log,
      trialMs: 10_000,
    });
    expect(code).toBe(0);
    expect(t.journalLines()).toEqual(["2.0.0 started", "1.0.0 started"]);
    expect(readlinkSync(t.versions.currentLink)).toBe("1.0.0");
    expect(t.versions.readTrial()).toBeUndefined();
    const outcome = readUpgradeOutcome(t.stateDir);
    expect(outcome).toMatchObject({ state: "failed", version: "2.0.0" });
    expect(outcome?.state === "failed" && outcome.error).toMatch(
      /rolled back: version 2.0.0 exited with code 1 before it came up/,
    );
  });

  it("rolls back when the new version does not come up in time, back to the workspace if that ran before", async () => {
    const t = setup();
    t.install("2.0.0", "silent");
    t.versions.switchTo("2.0.0");
    const code = await runSupervisor({
      argv: [],
      env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root },
      log,
      trialMs: 400,
      workspaceCommand: t.workspace("crash"),
    });
    expect(code).toBe(1);
    expect(t.journalLines()).toEqual(["2.0.0 started", "2.0.0 sigterm", "workspace started"]);
    expect(existsSync(t.versions.currentLink)).toBe(false);
    const outcome = readUpgradeOutcome(t.stateDir);
    expect(outcome?.state === "failed" && outcome.error).toMatch(/did not come up within/);
  });

  it("never starts a current version whose files are gone", async () => {
    const t = setup();
    t.install("1.0.0", "crash");
    t.install("2.0.0", "ready-then-exit");
    t.versions.switchTo("1.0.0");
    t.versions.clearTrial();
    t.versions.switchTo("2.0.0");
    t.versions.clearTrial();
    rmSync(join(t.versions.dir, "2.0.0", "agent.mjs"));
    const code = await runSupervisor({ argv: [], env: { ...process.env, KEELSON_STATE_DIR: t.stateDir.root }, log });
    expect(code).toBe(1);
    expect(t.journalLines()).toEqual(["1.0.0 started"]);
    expect(readlinkSync(t.versions.currentLink)).toBe("1.0.0");
  });
});

describe("keelson-agent launcher process", () => {
  const bin = resolve(import.meta.dirname, "..", "bin", "keelson-agent.mjs");

  function launch(stateDir: string): { child: ChildProcess; exited: Promise<number | null> } {
    const child = spawn(process.execPath, [bin], {
      env: { ...process.env, KEELSON_STATE_DIR: stateDir, KEELSON_LOG_LEVEL: "silent" },
      stdio: "ignore",
    });
    return { child, exited: new Promise((r) => child.once("exit", (code) => r(code))) };
  }

  async function until(what: () => boolean, ms = 15_000) {
    const deadline = Date.now() + ms;
    while (!what()) {
      if (Date.now() > deadline) throw new Error("timed out");
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("passes SIGTERM on to the agent and exits with its code", async () => {
    const t = setup();
    t.install("1.0.0", "silent");
    t.versions.switchTo("1.0.0");
    t.versions.clearTrial();
    const { child, exited } = launch(t.stateDir.root);
    await until(() => t.journalLines().includes("1.0.0 started"));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(t.journalLines()).toEqual(["1.0.0 started", "1.0.0 sigterm"]);
  });

  it("does not leave the agent running when the launcher is killed", async () => {
    const t = setup();
    t.install("1.0.0", "silent");
    t.versions.switchTo("1.0.0");
    t.versions.clearTrial();
    const { child, exited } = launch(t.stateDir.root);
    await until(() => t.journalLines().includes("1.0.0 started"));
    child.kill("SIGKILL");
    await exited;
    await until(() => t.journalLines().includes("1.0.0 orphaned"));
  });
});
