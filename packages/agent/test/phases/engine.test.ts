import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  PHASE_IDS,
  PHASES,
  type PhaseId,
  type PhaseStatusRecord,
  PhaseStatusRecord as PhaseStatusSchema,
  phasesForRole,
} from "@keelson/protocol";
import { Value } from "typebox/value";
import { afterEach, describe, expect, it } from "vitest";
import { PhaseEngine } from "../../src/phases/engine.ts";
import type { KubeApi } from "../../src/phases/kube-api.ts";
import { Reconciler, type RepairKind } from "../../src/phases/reconciler.ts";
import type { Phase, PhaseContext } from "../../src/phases/types.ts";
import type { ServiceManager } from "../../src/services/types.ts";
import { nodeConfig, tempDir, testLog } from "./helpers.ts";

/** Phases that do nothing but record calls; `failing` decides which ones throw, per action. */
class FakePhases {
  calls: string[] = [];
  failing = new Map<string, string>();
  hang = new Set<string>();
  contexts: PhaseContext[] = [];

  phases(): Phase[] {
    return PHASE_IDS.map((id) => ({
      id,
      start: (ctx) => this.act(id, "start", ctx),
      stop: (ctx) => this.act(id, "stop", ctx),
      status: (ctx) => this.act(id, "status", ctx),
    }));
  }

  callsOf(action: string): PhaseId[] {
    return this.calls.filter((c) => c.endsWith(`:${action}`)).map((c) => c.split(":")[0] as PhaseId);
  }

  private async act(id: PhaseId, action: string, ctx: PhaseContext) {
    this.calls.push(`${id}:${action}`);
    this.contexts.push(ctx);
    if (this.hang.has(`${id}:${action}`)) await new Promise(() => {});
    const error = this.failing.get(`${id}:${action}`) ?? this.failing.get(`${id}:*`);
    if (error) throw new Error(error);
    return id === "app-catalog" ? { message: "deprecated" } : undefined;
  }
}

const noServices = {} as ServiceManager;
const noKube = { url: "https://unused" } as KubeApi;
const dirs: string[] = [];

function setup(role: "master" | "worker" = "master", fake = new FakePhases(), stateDir = tempDir("engine")) {
  dirs.push(stateDir);
  const changes: PhaseStatusRecord[][] = [];
  const engine = new PhaseEngine({
    config: nodeConfig({ hostRoot: stateDir, primaryIp: "127.0.0.11", role }),
    phases: fake.phases(),
    stateFile: join(stateDir, "phases.json"),
    log: testLog(),
    services: noServices,
    signCsr: async () => {
      throw new Error("not used");
    },
    kubeApi: noKube,
    phaseTimeoutMs: 500,
    onChange: (list) => changes.push(list),
  });
  return { engine, fake, changes, stateDir };
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("phase catalogue", () => {
  it("lists the 21 phases of §4.9 in order, masters all, workers 15", () => {
    expect(PHASES).toHaveLength(21);
    expect(PHASES.map((p) => p.order)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    expect(new Set(PHASE_IDS).size).toBe(21);
    expect(phasesForRole("master")).toHaveLength(21);
    const worker = phasesForRole("worker").map((p) => p.id);
    expect(worker).toHaveLength(15);
    for (const id of ["configure-etcd", "start-etcd", "node-bouncer", "app-catalog", "keepalived", "coredns"]) {
      expect(worker).not.toContain(id);
    }
    expect(PHASES.filter((p) => p.stopOnly).map((p) => p.id)).toEqual(["drain-pods"]);
    expect(PHASES[0]?.id).toBe("gen-certs");
    expect(PHASES[20]?.id).toBe("drain-pods");
  });
});

describe("PhaseEngine", () => {
  it("starts ascending, skipping the stop-only drain, and reports every phase running", async () => {
    const { engine, fake } = setup();
    expect(engine.list().every((p) => p.state === "not-started")).toBe(true);
    const result = await engine.start();
    expect(result).toEqual({ ok: true });
    expect(fake.callsOf("start")).toEqual(PHASE_IDS.filter((id) => id !== "drain-pods"));
    expect(engine.allRunning()).toBe(true);
    const list = engine.list();
    expect(list.find((p) => p.id === "drain-pods")?.state).toBe("not-started");
    expect(list.find((p) => p.id === "app-catalog")?.message).toBe("deprecated");
    for (const record of list.filter((p) => p.id !== "drain-pods")) {
      expect(record.startedAt).not.toBeNull();
      expect(record.durationMs).toBeGreaterThanOrEqual(0);
      expect(Value.Check(PhaseStatusSchema, record)).toBe(true);
    }
  });

  it("runs only the worker's 15 phases on a worker", async () => {
    const { engine, fake } = setup("worker");
    await engine.start();
    expect(engine.list()).toHaveLength(15);
    expect(fake.callsOf("start")).toHaveLength(14);
    expect(fake.callsOf("start")).not.toContain("start-etcd");
    await expect(engine.start({ from: "start-etcd" })).rejects.toThrow(/not one of a worker's phases/);
  });

  it("starts from a given phase, and stops descending down to one (drain first)", async () => {
    const { engine, fake } = setup();
    await engine.start({ from: "network-config" });
    expect(fake.callsOf("start")[0]).toBe("network-config");
    expect(fake.callsOf("start")).not.toContain("start-etcd");
    fake.calls = [];
    await engine.stop({ to: "kubelet" });
    expect(fake.callsOf("stop")).toEqual([
      "drain-pods",
      "coredns",
      "keepalived",
      "app-catalog",
      "uncordon",
      "dynamic-kubelet-config",
      "node-taints",
      "wait-for-services",
      "kube-proxy",
      "kubelet",
    ]);
    expect(engine.list().find((p) => p.id === "kubelet")?.state).toBe("stopped");
    expect(engine.list().find((p) => p.id === "misc-checks")?.state).toBe("running");
    fake.calls = [];
    await engine.stop({ to: "uncordon", skipStopOnly: true });
    expect(fake.callsOf("stop")).toEqual(["coredns", "keepalived", "app-catalog", "uncordon"]);
  });

  it("stops at the first failing start, keeping the error and timings", async () => {
    const { engine, fake, changes } = setup();
    fake.failing.set("misc-checks:start", "swap is on");
    const result = await engine.start();
    expect(result).toEqual({ ok: false, failed: "misc-checks", error: "swap is on" });
    expect(fake.callsOf("start").at(-1)).toBe("misc-checks");
    const failed = engine.list().find((p) => p.id === "misc-checks")!;
    expect(failed).toMatchObject({ state: "failed", lastError: "swap is on" });
    expect(failed.finishedAt).not.toBeNull();
    expect(engine.list().find((p) => p.id === "kubelet")?.state).toBe("not-started");
    // Each transition was reported: executing, then failed.
    const states = changes.map((list) => list.find((p) => p.id === "misc-checks")?.state);
    expect(states).toContain("executing");
    expect(states.at(-1)).toBe("failed");
  });

  it("checks status ascending and stops at the first failure", async () => {
    const { engine, fake } = setup();
    await engine.start();
    fake.calls = [];
    fake.failing.set("load-user-images:status", "image gone");
    const result = await engine.status();
    expect(result).toMatchObject({ ok: false, failed: "load-user-images" });
    expect(fake.callsOf("status")).toEqual([
      "gen-certs",
      "prepare-config",
      "configure-runtime",
      "start-runtime",
      "load-user-images",
    ]);
    expect(engine.list().find((p) => p.id === "load-user-images")).toMatchObject({
      state: "failed",
      lastError: "image gone",
    });
    fake.failing.clear();
    expect(await engine.status()).toEqual({ ok: true });
    expect(engine.list().find((p) => p.id === "load-user-images")).toMatchObject({ state: "running", lastError: null });
  });

  it("keeps stopping below a phase that cannot stop", async () => {
    const { engine, fake } = setup();
    await engine.start();
    fake.failing.set("kubelet:stop", "kubelet would not die");
    const result = await engine.stop();
    expect(result).toMatchObject({ ok: false, failed: "kubelet" });
    expect(fake.callsOf("stop").at(-1)).toBe("gen-certs");
    expect(engine.list().find((p) => p.id === "start-etcd")?.state).toBe("stopped");
  });

  it("times out a phase that hangs", async () => {
    const { engine, fake } = setup();
    fake.hang.add("prepare-config:start");
    const result = await engine.start();
    expect(result).toMatchObject({ ok: false, failed: "prepare-config", error: "prepare-config start timed out" });
  });

  it("persists states atomically and restores them in a new engine", async () => {
    const { engine, fake, stateDir } = setup();
    fake.failing.set("kubelet:start", "no kubelet");
    await engine.start();
    const file = join(stateDir, "phases.json");
    const saved = JSON.parse(readFileSync(file, "utf8"));
    expect(saved.phases.find((p: PhaseStatusRecord) => p.id === "kubelet").lastError).toBe("no kubelet");

    const again = setup("master", new FakePhases(), stateDir).engine;
    expect(again.list()).toEqual(engine.list());

    // A phase caught executing when the agent died comes back failed, not executing forever.
    saved.phases.find((p: PhaseStatusRecord) => p.id === "kube-proxy").state = "executing";
    writeFileSync(file, JSON.stringify(saved));
    const third = setup("master", new FakePhases(), stateDir).engine;
    expect(third.list().find((p) => p.id === "kube-proxy")).toMatchObject({
      state: "failed",
      lastError: expect.stringMatching(/interrupted/),
    });

    // Another node's (or role's) file is not taken over.
    const worker = setup("worker", new FakePhases(), stateDir).engine;
    expect(worker.list().every((p) => p.state === "not-started")).toBe(true);
  });

  it("ignores a corrupt state file", () => {
    const dir = tempDir("engine");
    writeFileSync(join(dir, "phases.json"), "{not json");
    const { engine } = setup("master", new FakePhases(), dir);
    expect(engine.list()).toHaveLength(21);
  });
});

describe("Reconciler", () => {
  const fast = {
    checkIntervalMs: 5,
    retryIntervalMs: 1,
    maxRetryIntervalMs: 4,
    retryBudget: 3,
    fullRestartEvery: 3,
    failedRetryIntervalMs: 10,
  };

  async function until(what: string, probe: () => boolean, timeoutMs = 5000) {
    const deadline = Date.now() + timeoutMs;
    while (!probe()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }

  it("is ok when every phase runs, and converging then failed after the budget, then ok once fixed", async () => {
    const { engine, fake } = setup();
    const statuses: string[] = [];
    engine.on("node-status", (s) => statuses.push(s));
    const repairs: [RepairKind, number][] = [];
    const reconciler = new Reconciler(engine, testLog(), fast, (kind, attempt) => repairs.push([kind, attempt]));
    reconciler.run();
    await until("ok", () => engine.nodeStatus === "ok");

    fake.failing.set("kube-proxy:*", "kube-proxy crashed");
    await until("failed", () => engine.nodeStatus === "failed");
    expect(statuses).toEqual(["ok", "converging", "failed"]);
    expect(engine.list().find((p) => p.id === "kube-proxy")).toMatchObject({
      state: "failed",
      lastError: "kube-proxy crashed",
    });
    expect(repairs.slice(0, 3)).toEqual([
      ["resume", 1],
      ["resume", 2],
      ["full-restart", 3],
    ]);

    fake.failing.clear();
    await until("ok again", () => engine.nodeStatus === "ok");
    expect(reconciler.attempts).toBe(0);
    expect(engine.allRunning()).toBe(true);
    await reconciler.halt();
    expect(reconciler.running).toBe(false);
  });

  it("resumes from the failed phase (stopping down to it, without draining) and restarts fully every Nth attempt", async () => {
    const { engine, fake } = setup();
    fake.failing.set("wait-for-services:*", "apiserver not ready");
    const repairs: RepairKind[] = [];
    const reconciler = new Reconciler(engine, testLog(), { ...fast, retryBudget: 10 }, (kind) => repairs.push(kind));
    reconciler.run({ regenerateCerts: true });
    await until("three repairs", () => repairs.length >= 3);
    await reconciler.halt();

    // The first run started everything once; resumes never went below the failed phase.
    const genCertStarts = fake.calls.filter((c) => c === "gen-certs:start").length;
    expect(genCertStarts).toBe(2); // the initial run and the full restart (the 3rd attempt)
    expect(fake.callsOf("stop")).not.toContain("drain-pods");
    // A resume first looks again (status, ascending to the failure), then stops down to it.
    const firstResume = fake.calls.slice(fake.calls.indexOf("wait-for-services:start") + 1);
    const lookedAgain = firstResume.indexOf("wait-for-services:status");
    expect(firstResume.slice(0, lookedAgain + 1).every((c) => c.endsWith(":status"))).toBe(true);
    expect(firstResume[lookedAgain + 1]).toBe("coredns:stop");
    // Certificates are regenerated only on the first start that asked for it.
    const certContexts = fake.contexts.filter((_, i) => fake.calls[i] === "gen-certs:start");
    expect(certContexts.map((c) => c.regenerateCerts)).toEqual([true, false]);
    expect(certContexts.map((c) => c.intent)).toEqual(["start", "restart"]);
  });

  it("shuts down with the drain and reports ok", async () => {
    const { engine, fake } = setup();
    const reconciler = new Reconciler(engine, testLog(), fast);
    reconciler.run();
    await until("ok", () => engine.nodeStatus === "ok");
    fake.calls = [];
    const result = await reconciler.shutdown("detach");
    expect(result.ok).toBe(true);
    expect(fake.callsOf("stop")[0]).toBe("drain-pods");
    expect(fake.contexts.at(-1)?.intent).toBe("detach");
    expect(engine.list().filter((p) => p.state === "stopped")).toHaveLength(21);
  });
});
