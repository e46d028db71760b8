import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { detectServiceManagerKind } from "../../src/services/index.ts";
import { isSameProcess, processStartTime } from "../../src/services/process-info.ts";
import { renderUnit, type Systemctl, SystemdManager } from "../../src/services/systemd.ts";
import type { ServiceSpec } from "../../src/services/types.ts";
import { freePort, tempDir, testLog } from "./helpers.ts";

/** A service for tests: serves /healthz on its port; "--stubborn" ignores SIGTERM. */
const PROGRAM = `
import http from "node:http";
const [port, mode] = process.argv.slice(2);
if (mode === "--stubborn") process.on("SIGTERM", () => console.log("ignoring SIGTERM"));
else process.on("SIGTERM", () => { console.log("bye"); process.exit(0); });
if (mode === "--crash") { console.log("crashing"); process.exit(3); }
http.createServer((req, res) => { res.writeHead(200); res.end("ok"); }).listen(Number(port), "127.0.0.1");
console.log("up " + process.pid);
`;

const roots: string[] = [];
const supervisors: DirectSupervisor[] = [];

function setup(options: Partial<ConstructorParameters<typeof DirectSupervisor>[0]> = {}) {
  const hostRoot = tempDir("svc");
  roots.push(hostRoot);
  const program = join(hostRoot, "program.mjs");
  writeFileSync(program, PROGRAM);
  const supervisor = new DirectSupervisor({
    hostRoot,
    log: testLog(),
    restartBackoff: { initialMs: 20, maxMs: 100 },
    pollIntervalMs: 50,
    stopTimeoutMs: 500,
    ...options,
  });
  supervisors.push(supervisor);
  const spec = (port: number, mode = ""): ServiceSpec => ({
    name: "demo",
    description: "demo service",
    command: process.execPath,
    args: [program, String(port), ...(mode ? [mode] : [])],
    health: { kind: "http", url: `http://127.0.0.1:${port}/healthz` },
  });
  return { hostRoot, supervisor, spec };
}

afterEach(() => {
  for (const s of supervisors.splice(0)) s.close();
});

afterAll(() => {
  for (const root of roots) {
    killAllFromPidFiles(root);
    rmSync(root, { recursive: true, force: true });
  }
});

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("DirectSupervisor", () => {
  it("starts a detached service with a pid file and log, probes it, and stops it with SIGTERM", async () => {
    const { hostRoot, supervisor, spec } = setup();
    const port = await freePort("127.0.0.1");
    expect(await supervisor.install(spec(port))).toBe(true);
    expect(await supervisor.install(spec(port))).toBe(false);
    await supervisor.start("demo");
    const status = await supervisor.waitHealthy("demo", { timeoutMs: 5000 });
    expect(status.state).toBe("running");
    const pid = Number(readFileSync(join(hostRoot, "run", "keelson", "demo.pid"), "utf8"));
    expect(pid).toBe(status.pid);
    // Its own process group: it survives the agent like a systemd unit would.
    expect(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[2]).toBe(String(pid));
    await supervisor.stop("demo");
    expect(processStartTime(pid)).toBeUndefined();
    expect(existsSync(join(hostRoot, "run", "keelson", "demo.pid"))).toBe(false);
    expect(readFileSync(join(hostRoot, "var", "log", "keelson", "demo.log"), "utf8")).toMatch(/up \d+\nbye/);
    expect((await supervisor.status("demo")).state).toBe("stopped");
  });

  it("restarts a service that dies, and SIGKILLs one that ignores SIGTERM", async () => {
    const { supervisor, spec } = setup();
    const port = await freePort("127.0.0.1");
    await supervisor.install(spec(port, "--stubborn"));
    await supervisor.start("demo");
    const first = await supervisor.waitHealthy("demo", { timeoutMs: 5000 });
    process.kill(first.pid!, "SIGKILL");
    await until("a restart", async () => {
      const s = await supervisor.status("demo");
      return s.state === "running" && s.pid !== first.pid;
    });
    expect((await supervisor.status("demo")).restarts).toBe(1);
    const second = (await supervisor.status("demo")).pid!;
    const started = Date.now();
    await supervisor.stop("demo");
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(processStartTime(second)).toBeUndefined();
  });

  it("reports a crashing service as failed with the tail of its log", async () => {
    const { supervisor, spec } = setup({ restartBackoff: { initialMs: 5000, maxMs: 5000 } });
    await supervisor.install(spec(await freePort("127.0.0.1"), "--crash"));
    await supervisor.start("demo");
    // The process is gone (per /proc) a moment before its exit status arrives: wait for both.
    await until("the crash", async () => /last exit/.test((await supervisor.status("demo")).detail));
    const status = await supervisor.status("demo");
    expect(status.detail).toMatch(/last exit: code 3/);
    expect(status.detail).toMatch(/crashing/);
    await expect(supervisor.waitHealthy("demo", { timeoutMs: 100 })).rejects.toThrow(
      /did not become healthy within 100 ms/,
    );
    await supervisor.stop("demo");
  });

  it("shows unhealthy when the process lives but its probe fails", async () => {
    const { supervisor, spec } = setup();
    const port = await freePort("127.0.0.1");
    // The probe asks a port nothing listens on.
    const other = await freePort("127.0.0.1");
    await supervisor.install({
      ...spec(port),
      health: { kind: "http", url: `http://127.0.0.1:${other}/healthz`, timeoutMs: 500 },
    });
    await supervisor.start("demo");
    await until("alive", async () => (await supervisor.status("demo")).pid !== null);
    const status = await supervisor.status("demo");
    expect(status.state).toBe("unhealthy");
    expect(status.detail).toMatch(/ECONNREFUSED/);
    await supervisor.stop("demo");
  });

  it("adopts running services in a new supervisor and restarts them when they die", async () => {
    const { hostRoot, supervisor, spec } = setup();
    const port = await freePort("127.0.0.1");
    await supervisor.install(spec(port));
    await supervisor.start("demo");
    const first = await supervisor.waitHealthy("demo", { timeoutMs: 5000 });
    supervisor.close();

    const next = new DirectSupervisor({
      hostRoot,
      log: testLog(),
      pollIntervalMs: 30,
      restartBackoff: { initialMs: 10, maxMs: 50 },
    });
    supervisors.push(next);
    expect((await next.status("demo")).pid).toBe(first.pid);
    process.kill(first.pid!, "SIGKILL");
    await until("restart by the adopter", async () => {
      const s = await next.status("demo");
      return s.state === "running" && s.pid !== first.pid;
    });
    await next.stop("demo");
    expect(next.livePids()).toEqual({});
  });

  it("refuses a missing command and never signals a recycled pid", async () => {
    const { supervisor } = setup();
    await supervisor.install({ name: "ghost", description: "x", command: "/nonexistent/bin/ghost", args: [] });
    await expect(supervisor.start("ghost")).rejects.toThrow(/\/nonexistent\/bin\/ghost is missing or not executable/);
    // Our own pid with a wrong start time is "not the same process".
    expect(isSameProcess(process.pid, "1")).toBe(false);
    expect(isSameProcess(process.pid, processStartTime(process.pid))).toBe(true);
  });
});

describe("SystemdManager", () => {
  it("writes a unit under the host root and drives systemctl", async () => {
    const hostRoot = tempDir("systemd");
    roots.push(hostRoot);
    const calls: string[] = [];
    const systemctl: Systemctl = async (args) => {
      calls.push(args.join(" "));
      if (args[0] === "show")
        return { exitCode: 0, stdout: "ActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=2\n", stderr: "" };
      return { exitCode: 0, stdout: "", stderr: "" };
    };
    const manager = new SystemdManager({ hostRoot, log: testLog(), systemctl });
    const spec: ServiceSpec = {
      name: "etcd",
      description: "etcd member",
      command: "/opt/keelson/node/bin/etcd",
      args: ["--name", "a b"],
      environmentFile: "/etc/etcd/etcd.env",
      env: { PATH: "/usr/bin" },
    };
    expect(await manager.install(spec)).toBe(true);
    expect(await manager.install(spec)).toBe(false);
    const unit = readFileSync(join(hostRoot, "etc", "systemd", "system", "keelson-etcd.service"), "utf8");
    expect(unit).toContain('ExecStart=/opt/keelson/node/bin/etcd --name "a b"');
    expect(unit).toContain("EnvironmentFile=/etc/etcd/etcd.env");
    expect(unit).toContain("Restart=always");
    await manager.start("etcd");
    expect(await manager.status("etcd")).toMatchObject({ state: "running", pid: 4242, restarts: 2 });
    await manager.stop("etcd");
    expect(calls).toEqual([
      "daemon-reload",
      "enable --now keelson-etcd.service",
      "show keelson-etcd.service --property=ActiveState,SubState,MainPID,NRestarts",
      "disable --now keelson-etcd.service",
    ]);
  });

  it("escapes % and quotes in ExecStart", () => {
    const unit = renderUnit({ name: "x", description: "x", command: "/bin/x", args: ["50%", 'say "hi"'] });
    expect(unit).toContain('ExecStart=/bin/x "50%%" "say \\"hi\\""');
  });

  it("keeps a runtime's children across a stop: Delegate=yes and KillMode=process only when asked", () => {
    const spec = { name: "containerd", description: "runtime", command: "/bin/containerd", args: [] };
    const keeps = renderUnit({ ...spec, keepChildrenOnStop: true });
    expect(keeps).toContain("\nDelegate=yes\nKillMode=process\n");
    expect(renderUnit(spec)).not.toMatch(/Delegate|KillMode/);
  });

  it("is chosen only with systemd running and the real root", async () => {
    const marker = tempDir("marker");
    roots.push(marker);
    const ok: Systemctl = async () => ({ exitCode: 0, stdout: "systemd 252", stderr: "" });
    const broken: Systemctl = async () => ({
      exitCode: 1,
      stdout: "",
      stderr: "System has not been booted with systemd",
    });
    expect(await detectServiceManagerKind({ hostRoot: "/", systemdMarker: marker, systemctl: ok })).toBe("systemd");
    expect(await detectServiceManagerKind({ hostRoot: "/", systemdMarker: marker, systemctl: broken })).toBe("direct");
    expect(await detectServiceManagerKind({ hostRoot: "/", systemdMarker: join(marker, "nope"), systemctl: ok })).toBe(
      "direct",
    );
    expect(await detectServiceManagerKind({ hostRoot: marker, systemdMarker: marker, systemctl: ok })).toBe("direct");
    expect(await detectServiceManagerKind({ hostRoot: marker, override: "systemd" })).toBe("systemd");
    await expect(detectServiceManagerKind({ hostRoot: "/", override: "upstart" })).rejects.toThrow(
      /must be "systemd" or "direct"/,
    );
    // This machine runs no systemd: tests use direct supervision.
    expect(await detectServiceManagerKind({ hostRoot: "/" })).toBe("direct");
  });
});
