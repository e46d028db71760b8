import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { release } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { NodeConfigInput } from "../../src/phases/config.ts";
import { miscChecks } from "../../src/phases/impl/checks.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { DirectSupervisor } from "../../src/services/direct.ts";
import { fakeHost, freePort, nodeConfig, phaseContexts, tempDir, testLog } from "./helpers.ts";

/**
 * The misc-checks phase applies the kernel settings Kubernetes needs (modules-load.d,
 * sysctl.d, and the running kernel when it manages the real host), then checks.
 */

const roots: string[] = [];
const supervisors: DirectSupervisor[] = [];

afterAll(() => {
  for (const s of supervisors) s.close();
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function setup(hostInput: (root: string) => NodeConfigInput["host"], input: Partial<NodeConfigInput> = {}) {
  const root = tempDir("misc");
  roots.push(root);
  const config = nodeConfig({ hostRoot: join(root, "host"), primaryIp: "127.0.0.11", host: hostInput(root), ...input });
  const services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
  supervisors.push(services);
  const paths = nodePaths(config.hostRoot);
  const ctx = phaseContexts({ config, services });
  return { root, config, paths, ctx };
}

const MODULES_FILE =
  "# Written by keelson-agent (misc-checks phase): what Kubernetes needs of the kernel.\noverlay\nbr_netfilter\n";
const SYSCTL_FILE =
  "# Written by keelson-agent (misc-checks phase): what Kubernetes needs of the kernel.\n" +
  "net.bridge.bridge-nf-call-iptables = 1\nnet.bridge.bridge-nf-call-ip6tables = 1\nnet.ipv4.ip_forward = 1\n";

describe("misc checks on a fake /proc and /sys", () => {
  it("writes the modules and sysctls under the host root and passes on a prepared host", async () => {
    const { ctx, paths, config } = setup((root) => fakeHost(root));
    expect(config.host.applyLive).toBe(false);
    expect(await miscChecks.start(ctx())).toEqual({ message: "swap off, modules present, sysctls set, ports free" });
    expect(paths.modulesLoadConf).toBe(join(config.hostRoot, "etc", "modules-load.d", "keelson.conf"));
    expect(readFileSync(paths.modulesLoadConf, "utf8")).toBe(MODULES_FILE);
    expect(readFileSync(paths.sysctlConf, "utf8")).toBe(SYSCTL_FILE);
    await expect(miscChecks.status(ctx("status"))).resolves.toBeUndefined();
    rmSync(paths.sysctlConf);
    await expect(miscChecks.status(ctx("status"))).rejects.toThrow(/99-keelson\.conf is missing/);
  });

  it("names exactly what is still wrong, and that it was not applied live off the real host", async () => {
    const squatter: Server = createServer();
    const port = await freePort("127.0.0.11");
    await new Promise<void>((r) => squatter.listen({ host: "127.0.0.11", port }, () => r()));
    try {
      const { ctx } = setup(
        (root) =>
          fakeHost(root, {
            swaps: "Filename Type Size Used Priority\n/dev/sda2 partition 1048572 0 -2\n",
            modules: "overlay 151552 0 - Live 0x0\n",
            sysctls: { "net.ipv4.ip_forward": "0" },
          }),
        { ports: { kubeletHealthz: port } },
      );
      const error = await miscChecks.start(ctx()).catch((e: Error) => e.message);
      const notLive = "(not applied to the running kernel: the agent does not manage the real host)";
      expect(error).toMatch(/swap is on \(\/dev\/sda2\).*swapoff -a/);
      expect(error).toContain(`kernel module(s) br_netfilter neither loaded nor built in ${notLive}`);
      expect(error).toContain(`sysctl net.ipv4.ip_forward is 0, needs 1 ${notLive}`);
      expect(error).toMatch(/sysctl net\.bridge\.bridge-nf-call-iptables is missing \(.*\), needs 1/);
      expect(error).toMatch(/sysctl net\.bridge\.bridge-nf-call-ip6tables is missing \(.*\), needs 1/);
      // The squatter is this test process itself (its comm is whatever title vitest gave it).
      const comm = readFileSync(`/proc/${process.pid}/comm`, "utf8").trim();
      expect(error).toContain(`port ${port} (kubelet healthz) on 127.0.0.11 is taken by ${comm} (pid ${process.pid})`);
      expect(error).not.toContain("overlay");
    } finally {
      squatter.close();
    }
  });

  it("recognises built-in modules by their effect, /sys/module, or modules.builtin", async () => {
    // br_netfilter built in: its sysctls exist but neither /proc/modules nor /sys/module shows it
    // (this machine's kernel); overlay built in shows as a filesystem.
    const byEffect = setup((root) => {
      const host = fakeHost(root, { modules: "" });
      writeFileSync(join(host.procRoot, "filesystems"), "nodev\tproc\nnodev\toverlay\n");
      return host;
    });
    await expect(miscChecks.start(byEffect.ctx())).resolves.toBeDefined();

    const bySys = setup((root) => {
      const host = fakeHost(root, { modules: "overlay 1 0 - Live 0x0\n" });
      mkdirSync(join(host.sysRoot, "module", "br_netfilter"), { recursive: true });
      // Without the effect: only /sys can tell.
      rmSync(join(host.procRoot, "sys", "net", "bridge"), { recursive: true });
      return { ...host, requiredSysctls: { "net.ipv4.ip_forward": "1" } };
    });
    await expect(miscChecks.start(bySys.ctx())).resolves.toBeDefined();

    const byList = setup((root) => {
      const host = fakeHost(root, { modules: "" });
      mkdirSync(join(host.modulesRoot, release()), { recursive: true });
      writeFileSync(
        join(host.modulesRoot, release(), "modules.builtin"),
        "kernel/fs/overlayfs/overlay.ko\nkernel/net/bridge/br_netfilter.ko\n",
      );
      // Without the effect: only the list can tell.
      rmSync(join(host.procRoot, "sys", "net", "bridge"), { recursive: true });
      return { ...host, requiredSysctls: { "net.ipv4.ip_forward": "1" } };
    });
    await expect(miscChecks.start(byList.ctx())).resolves.toBeDefined();
  });

  it("sets the sysctls itself when told it manages the host (here a fake /proc)", async () => {
    const { ctx } = setup((root) => ({
      ...fakeHost(root, { sysctls: { "net.ipv4.ip_forward": "0", "net.bridge.bridge-nf-call-iptables": "0" } }),
      requiredSysctls: { "net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1" },
      applyLive: true,
    }));
    expect((await miscChecks.start(ctx()))?.message).toBe(
      "swap off, modules present, sysctls set (set net.ipv4.ip_forward=1, set net.bridge.bridge-nf-call-iptables=1), ports free",
    );
    await expect(miscChecks.status(ctx("status"))).resolves.toBeUndefined();
  });
});

describe("misc checks on this machine's own kernel", () => {
  it("applies the modules and sysctls Kubernetes needs and then passes (br_netfilter built in here)", async () => {
    if (process.getuid?.() !== 0) throw new Error("setting sysctls on the running kernel needs root");
    const { ctx, paths, config } = setup(() => ({ applyLive: true }));
    // The real /proc, /sys and /lib/modules; only the files go under the test's host root.
    expect(config.host).toMatchObject({ procRoot: "/proc", sysRoot: "/sys" });
    const files = Object.keys(config.host.requiredSysctls).map((name) => `/proc/sys/${name.replaceAll(".", "/")}`);
    // Applying ip_forward=1 changes this machine: put every value back afterwards.
    const before = files.map((file) => readFileSync(file, "utf8"));
    try {
      const outcome = await miscChecks.start(ctx());
      expect(outcome?.message).toMatch(/^swap off, modules present, sysctls set.*, ports free$/);
      for (const file of files) expect(readFileSync(file, "utf8"), file).toBe("1\n");
      expect(readFileSync(paths.modulesLoadConf, "utf8")).toBe(MODULES_FILE);
      expect(readFileSync(paths.sysctlConf, "utf8")).toBe(SYSCTL_FILE);
      await expect(miscChecks.status(ctx("status"))).resolves.toBeUndefined();
    } finally {
      for (const [i, file] of files.entries()) writeFileSync(file, before[i] as string);
    }
    expect(files.map((file) => readFileSync(file, "utf8"))).toEqual(before);
  });
});
