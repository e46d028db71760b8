import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PHASE_IDS } from "@keelson/protocol";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CommandRecord } from "../src/link/command-record.ts";
import { PhaseEngine } from "../src/phases/engine.ts";
import type { KubeApi } from "../src/phases/kube-api.ts";
import { loadPhaseState } from "../src/phases/state-file.ts";
import type { Phase } from "../src/phases/types.ts";
import type { ServiceManager } from "../src/services/types.ts";
import { writeFileAtomic } from "../src/state-dir.ts";
import { StateDirSpace } from "../src/state-space.ts";
import { nodeConfig, testLog } from "./phases/helpers.ts";

/**
 * The agent's state-file writers on a real full disk: a 1 MiB tmpfs this file mounts (root is
 * available in tests and CI), filled with a file written until ENOSPC.
 */
let dir: string;
const filler = () => join(dir, "filler");

function fill(): void {
  const bytes = Number(statfsSync(dir).bavail) * Number(statfsSync(dir).bsize);
  if (bytes > 0) execFileSync("fallocate", ["-l", String(bytes), filler()]);
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "keelson-agent-full-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]);
});

afterAll(() => {
  try {
    execFileSync("umount", [dir]);
  } catch {
    execFileSync("umount", ["-l", dir]);
  }
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
});

const leftovers = (root: string) => readdirSync(root, { recursive: true }).filter((f) => String(f).endsWith(".tmp"));

describe("a full state dir", () => {
  it("keeps a state file's old content whole, removes the temp file, and raises the condition", () => {
    const state = join(dir, "state");
    const file = join(state, "upgrade-status.json");
    writeFileAtomic(file, '{"old":true}\n');
    let told = 0;
    const space = new StateDirSpace(state, () => told++);
    try {
      expect(space.check()).toEqual([]);
      fill();
      // A write refused elsewhere (the host root) is not the state dir's condition.
      expect(() => writeFileAtomic(join(dir, "host", "f"), "x".repeat(64 * 1024))).toThrow(/ENOSPC/);
      expect(told).toBe(0);
      expect(() => writeFileAtomic(file, JSON.stringify({ big: "x".repeat(64 * 1024) }))).toThrow(/ENOSPC/);
      expect(readFileSync(file, "utf8")).toBe('{"old":true}\n');
      expect(leftovers(dir)).toEqual([]);
      expect(told).toBe(1);
      expect(space.conditions()).toMatchObject([{ code: "state_dir_full" }]);
      // Space back: the first look with room keeps it (a write was refused since), the next clears.
      rmSync(filler());
      expect(space.check()).toHaveLength(1);
      expect(space.check()).toEqual([]);
    } finally {
      space.close();
    }
  });

  it("does not fail a phase when its states cannot be saved; the next save writes them all", async () => {
    const state = join(dir, "state");
    mkdirSync(state);
    const stateFile = join(state, "phases.json");
    const phases: Phase[] = PHASE_IDS.map((id) => ({
      id,
      start: async () => undefined,
      stop: async () => undefined,
      status: async () => undefined,
    }));
    const engine = new PhaseEngine({
      config: nodeConfig({ hostRoot: join(dir, "host"), primaryIp: "127.0.0.11", role: "worker" }),
      phases,
      stateFile,
      log: testLog(),
      services: {} as ServiceManager,
      signCsr: async () => {
        throw new Error("not used");
      },
      kubeApi: { url: "https://unused" } as KubeApi,
      phaseTimeoutMs: 500,
    });
    writeFileSync(stateFile, "");
    fill();
    expect(await engine.start()).toEqual({ ok: true });
    expect(engine.allRunning()).toBe(true);
    expect(readFileSync(stateFile, "utf8")).toBe("");
    expect(leftovers(dir)).toEqual([]);
    rmSync(filler());
    await engine.stop({ to: "kubelet" });
    expect(loadPhaseState(stateFile)?.phases.find((p) => p.id === "kubelet")?.state).toBe("stopped");
  });

  it("answers commands from memory when their record cannot be saved", () => {
    const file = join(dir, "commands.json");
    const record = new CommandRecord(file);
    record.start("c1", "ping");
    fill();
    record.start("c2", "ping");
    record.finish("c2", { ok: true, result: {} });
    expect(record.get("c2")?.outcome).toEqual({ ok: true, result: {} });
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual([expect.objectContaining({ id: "c1" })]);
    expect(leftovers(dir)).toEqual([]);
  });
});
