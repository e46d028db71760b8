import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { coredns } from "../../src/phases/impl/masters.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { addressesClash, isWithin, listenersOn, socketHolders } from "../../src/services/port-holder.ts";
import { freePorts, nodeConfig, phaseContexts, tempDir, testLog } from "./helpers.ts";

/**
 * A leftover process on a service's port: the phase fails at once naming the port and the
 * process (read from /proc), instead of waiting out the health timeout while the service dies
 * on bind over and over.
 */

const IP = "127.0.0.1";
const root = tempDir("ports");
const services = new DirectSupervisor({ hostRoot: join(root, "host"), log: testLog() });
const squatters: ChildProcess[] = [];

afterAll(() => {
  for (const child of squatters) child.kill("SIGKILL");
  services.close();
  killAllFromPidFiles(join(root, "host"));
  rmSync(root, { recursive: true, force: true });
});

/** A real process (not this one) listening on IP:port; resolves once it listens. */
async function squat(port: number): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ["-e", `require("node:net").createServer().listen(${port}, "${IP}", () => console.log("listening"))`],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  squatters.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`squatter exited ${code}`)));
  });
  return child;
}

async function context() {
  const config = nodeConfig({ hostRoot: join(root, "host"), primaryIp: IP, ports: await freePorts(IP) });
  // coredns reads the client certificate files its Corefile names at start, as CoreDNS's
  // kubernetes plugin does (it refuses to start without them). No API runs here, so their
  // content is never used.
  const paths = nodePaths(config.hostRoot);
  mkdirSync(paths.pki, { recursive: true });
  for (const file of [paths.cert("kubelet"), paths.key("kubelet"), paths.caCert]) writeFileSync(file, "");
  const ctx = phaseContexts({ config, services });
  return { config, ctx };
}

describe("a service's port held by another process", () => {
  it("fails the phase within seconds naming the port and the process, and starts once it is free", async () => {
    const { config, ctx } = await context();
    const port = config.ports.corednsHealth;
    const squatter = await squat(port);

    const began = Date.now();
    const error = await coredns.start(ctx("start")).catch((e: Error) => e.message);
    expect(Date.now() - began).toBeLessThan(2_000);
    expect(error).toBe(
      `cannot start coredns: port ${port} is already in use by node (pid ${squatter.pid}), listening on ${IP}; stop that process or free the port`,
    );
    expect((await services.status("coredns")).pid).toBeNull();

    squatter.kill("SIGKILL");
    await new Promise((r) => squatter.once("exit", r));
    expect((await coredns.start(ctx("start")))?.message).toMatch(/^coredns pid \d+$/);
    // Its own process on the port is no conflict: starting again is a no-op, not a failure.
    const { pid } = await services.status("coredns");
    expect((await coredns.start(ctx("start")))?.message).toBe(`coredns pid ${pid}`);
    await coredns.stop(ctx("stop"));
  }, 30_000);
});

describe("reading port holders from /proc", () => {
  it("finds the listening socket and the process holding it", async () => {
    const [port] = Object.values(await freePorts(IP));
    const squatter = await squat(port as number);
    const sockets = listenersOn(port as number);
    expect(sockets.map((s) => s.address)).toEqual([IP]);
    expect(socketHolders(new Set(sockets.map((s) => s.inode)))).toEqual([{ pid: squatter.pid, comm: "node" }]);
    expect(isWithin(squatter.pid as number, process.pid)).toBe(true);
    expect(isWithin(process.pid, squatter.pid as number)).toBe(false);
    squatter.kill("SIGKILL");
  });

  it("knows which listening addresses keep a new listener off the port", () => {
    expect(addressesClash("0.0.0.0", "10.0.0.5")).toBe(true);
    expect(addressesClash("::", "10.0.0.5")).toBe(true);
    expect(addressesClash("10.0.0.5", "10.0.0.5")).toBe(true);
    expect(addressesClash("::ffff:10.0.0.5", "10.0.0.5")).toBe(true);
    expect(addressesClash("127.0.0.1", "10.0.0.5")).toBe(false);
    expect(addressesClash("fd00:0:0:0:0:0:0:1", "fd00::1")).toBe(true);
    expect(addressesClash("fd00:0:0:0:0:0:0:2", "fd00::1")).toBe(false);
  });
});
