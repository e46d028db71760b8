import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { startConnectProxy } from "../../../../test/support/connect-proxy.ts";
import { writeOciArchive } from "../../../../test/support/oci-image.ts";
import type { NodeConfigInput } from "../../src/phases/config.ts";
import { renderContainerdConfig } from "../../src/phases/impl/containerd-config.ts";
import { noProxyEntries } from "../../src/phases/impl/node-proxy.ts";
import {
  configureRuntime,
  loadUserImages,
  startRuntime,
  validateContainerdConfig,
} from "../../src/phases/impl/runtime.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { criPullImage } from "./cri-pull.ts";
import { FIXTURE_NODE_PACKAGE, fakeHost, nodeConfig, phaseContexts, tempDir, testLog } from "./helpers.ts";

/**
 * The runtime phases against Debian's real containerd, ctr and runc (the test node package's
 * wrappers): the config the real containerd accepts, a probe container, OCI image import, and
 * containers that outlive a runtime restart. Needs root, as containerd does.
 */

const roots: string[] = [];
const supervisors: DirectSupervisor[] = [];
const CTR = join(FIXTURE_NODE_PACKAGE, "bin", "ctr");

function setup(input: Partial<NodeConfigInput> = {}) {
  const root = tempDir("rt");
  roots.push(root);
  const config = nodeConfig({ hostRoot: join(root, "host"), primaryIp: "127.0.0.12", host: fakeHost(root), ...input });
  const services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
  supervisors.push(services);
  const paths = nodePaths(config.hostRoot);
  const ctx = phaseContexts({ config, services, timeoutMs: 60_000 });
  const ctr = (...args: string[]) => execa(CTR, ["--address", paths.containerdSocket, ...args]);
  return { root, config, services, ctx, paths, ctr };
}

/** A process's environment as the kernel keeps it. */
function environOf(pid: number | null): Record<string, string> {
  const text = readFileSync(`/proc/${pid}/environ`, "utf8");
  return Object.fromEntries(
    text
      .split("\0")
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

afterAll(() => {
  for (const s of supervisors) s.close();
  for (const root of roots) {
    killAllFromPidFiles(join(root, "host"));
    rmSync(root, { recursive: true, force: true });
  }
});

describe("containerd configuration", () => {
  it("renders a config.toml the real containerd reads back with the CRI, cgroup and CNI settings", async () => {
    const { ctx, config, paths, root } = setup({
      cluster: { kubeRoleVersion: "1.31.4-kls.1", k8sPrivateRegistry: "k8s.mirror.local" },
    });
    await configureRuntime.start(ctx());
    const dump = await execa(join(FIXTURE_NODE_PACKAGE, "bin", "containerd"), [
      "--config",
      paths.containerdConfig,
      "config",
      "dump",
    ]);
    expect(dump.stdout).toContain(`root = "${paths.containerdRoot}"`);
    expect(dump.stdout).toContain(`address = "${paths.containerdSocket}"`);
    expect(dump.stdout).toContain('sandbox_image = "k8s.mirror.local/pause:3.10"');
    expect(dump.stdout).toContain("SystemdCgroup = true");
    expect(dump.stdout).toContain('bin_dir = "/usr/lib/cni"');
    expect(dump.stdout).toContain(`conf_dir = "${paths.cniConfDir}"`);
    expect(
      renderContainerdConfig({ ...config, cluster: { ...config.cluster, kubeRoleVersion: "1.29.10" } }, paths),
    ).toContain('"k8s.mirror.local/pause:3.9"');
    // A file containerd cannot parse fails with containerd's own words, and nothing is left behind.
    await expect(validateContainerdConfig(ctx(), "version = 2\n[grpc\n")).rejects.toThrow(
      /containerd refuses the configuration it was given: .*unclosed table key/,
    );
    await expect(execa("ls", [join(root, "host", "etc", "containerd")])).resolves.toMatchObject({
      stdout: "config.toml",
    });
  });
});

describe("container runtime and user images", () => {
  it("starts containerd, runs a probe container, imports an OCI archive, and lists the image", async () => {
    const { ctx, paths, services, ctr } = setup();
    expect((await loadUserImages.status(ctx("status")))?.message).toMatch(/no user images/);
    await configureRuntime.start(ctx());
    const started = await startRuntime.start(ctx());
    expect(started?.message).toMatch(/a probe container ran and was removed/);
    await expect(startRuntime.status(ctx("status"))).resolves.toBeUndefined();
    expect((await ctr("-n", "keelson-probe", "containers", "ls", "-q")).stdout.trim()).toBe("");

    mkdirSync(paths.userImages, { recursive: true });
    writeOciArchive(
      join(paths.root, "..", "image"),
      join(paths.userImages, "probe.tar"),
      "example.com/keelson/probe:1.0",
    );
    await expect(loadUserImages.status(ctx("status"))).rejects.toThrow(/not imported yet: .*probe.tar/);
    expect(await loadUserImages.start(ctx())).toEqual({ message: "1 archive(s), 1 imported now" });
    await expect(loadUserImages.status(ctx("status"))).resolves.toEqual({ message: "1 archive(s) loaded" });
    expect((await ctr("-n", "k8s.io", "images", "ls", "-q")).stdout.split("\n")).toContain(
      "example.com/keelson/probe:1.0",
    );

    // A container of the imported image outlives a runtime restart (its shim is not containerd's child to kill).
    const id = `keelson-keep-${process.pid}`;
    try {
      await ctr("-n", "k8s.io", "run", "-d", "example.com/keelson/probe:1.0", id, "/bin/busybox", "sleep", "60");
      const before = (await ctr("-n", "k8s.io", "tasks", "ls")).stdout;
      expect(before).toMatch(new RegExp(`${id}\\s+\\d+\\s+RUNNING`));
      await services.restart("containerd");
      await services.waitHealthy("containerd", { timeoutMs: 20_000 });
      expect((await ctr("-n", "k8s.io", "tasks", "ls")).stdout).toBe(before);
    } finally {
      await ctr("-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).catch(() => undefined);
      for (let i = 0; i < 50; i++) {
        const rm = await ctr("-n", "k8s.io", "tasks", "rm", id).catch((e: { stderr: string }) => e);
        if (!("stderr" in rm) || /not found/.test(rm.stderr)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await ctr("-n", "k8s.io", "containers", "rm", id).catch(() => undefined);
    }
    expect((await ctr("-n", "k8s.io", "containers", "ls", "-q")).stdout.trim()).toBe("");

    await startRuntime.stop(ctx("stop"));
    expect(services.livePids()).toEqual({});
    await expect(startRuntime.status(ctx("status"))).rejects.toThrow(/containerd is stopped/);
  }, 90_000);

  it("fails the runtime phase with runc's words when no container can start", async () => {
    const { ctx, paths, ctr } = setup();
    // The probe's /bin/true is there but not executable: runc refuses to exec it.
    const bin = join(paths.keelsonVar, "runtime-probe", "rootfs", "bin");
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, "true"), "not a program\n");
    chmodSync(join(bin, "true"), 0o644);
    await configureRuntime.start(ctx());
    await expect(startRuntime.start(ctx())).rejects.toThrow(
      /the container runtime cannot start a container .*runc create failed: .*permission denied/,
    );
    // The failed probe left no container behind.
    expect((await ctr("-n", "keelson-probe", "containers", "ls", "-q")).stdout.trim()).toBe("");
    await startRuntime.stop(ctx("stop"));
  }, 60_000);

  it("fails the runtime phase when containerd runs without its CRI plugin", async () => {
    const { ctx, paths } = setup();
    await configureRuntime.start(ctx());
    const toml = readFileSync(paths.containerdConfig, "utf8");
    writeFileSync(
      paths.containerdConfig,
      toml.replace("version = 2\n", 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n'),
    );
    await expect(startRuntime.start(ctx())).rejects.toThrow(/containerd runs without its CRI plugin/);
    await startRuntime.stop(ctx("stop"));
  }, 60_000);

  it("fails a phase whose binary is missing, naming it", async () => {
    const root = tempDir("pkg");
    roots.push(root);
    mkdirSync(join(root, "bin"));
    const { ctx } = setup({ nodePackage: root });
    await expect(configureRuntime.start(ctx())).rejects.toThrow(
      `required binary "containerd" not found; looked for ${root}/bin/containerd`,
    );
  });
});

describe("the cluster's proxy in containerd's environment", () => {
  it("containerd gets HTTP_PROXY, HTTPS_PROXY and NO_PROXY with a proxy, none without, nothing else changed; its CRI pulls go through the proxy", async () => {
    const { ctx, config, services, paths } = setup();
    await configureRuntime.start(ctx());
    await startRuntime.start(ctx());
    const plain = (await services.status("containerd")).pid;
    const without = environOf(plain);
    expect(Object.keys(without).filter((name) => /proxy/i.test(name))).toEqual([]);

    // A proxy that refuses every tunnel: it only notes where containerd asked to go.
    const proxy = await startConnectProxy();
    proxy.refuse = true;
    const proxiedConfig = { ...config, cluster: { ...config.cluster, httpProxy: proxy.url } };
    const proxied = phaseContexts({ config: proxiedConfig, services, timeoutMs: 60_000 });
    try {
      // The phase's next start restarts containerd with the proxy (config.toml is unchanged).
      expect((await configureRuntime.start(proxied()))?.message).toBe("up to date");
      await startRuntime.start(proxied());
      const pid = (await services.status("containerd")).pid;
      expect(pid).not.toBe(plain);
      expect(environOf(pid)).toEqual({
        ...without,
        HTTP_PROXY: proxy.url,
        HTTPS_PROXY: proxy.url,
        NO_PROXY: noProxyEntries(proxiedConfig).join(","),
      });
      expect(environOf(pid).NO_PROXY).toBe(
        "localhost,127.0.0.1,::1,127.0.0.12,10.20.0.0/16,10.21.0.0/16,.svc,.cluster.local",
      );

      // The kubelet's pull, in containerd's process: a registry outside the cluster is asked
      // for through the proxy (which refuses, so nothing leaves the machine).
      const pull = await criPullImage(paths.containerdSocket, "registry.keelson.test/keelson/probe:1.0");
      expect(pull.status).not.toBe(0);
      expect(pull.message).toMatch(/registry\.keelson\.test/);
      expect(proxy.connects).toContain("registry.keelson.test:443");

      // And back: the cluster without a proxy gives containerd none again.
      await startRuntime.start(ctx());
      expect(environOf((await services.status("containerd")).pid)).toEqual(without);
    } finally {
      await proxy.close();
      await startRuntime.stop(ctx("stop"));
    }
  }, 120_000);
});
