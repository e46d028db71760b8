import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { controllerManagerSpec } from "../../packages/agent/src/phases/impl/controllers.ts";
import { nodePaths } from "../../packages/agent/src/phases/paths.ts";
import type { PhaseContext } from "../../packages/agent/src/phases/types.ts";
import { nodeConfig } from "../../packages/agent/test/phases/helpers.ts";

/**
 * The test node package's stand-ins refuse what the real Kubernetes binaries refuse, in their
 * words (test/fixtures/node-package/lib/flags.mjs holds the flag names and their sources).
 * Each minor is played by a copy of the package whose manifest names that version.
 */
const FIXTURE = join(import.meta.dirname, "..", "fixtures", "node-package");
const scratch = mkdtempSync(join(tmpdir(), "keelson-strict-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const packages = new Map<number, string>();
function packageFor(minor: number): string {
  let dir = packages.get(minor);
  if (dir) return dir;
  dir = join(scratch, `1.${minor}`);
  cpSync(FIXTURE, dir, { recursive: true });
  const manifestPath = join(dir, "manifest.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  manifest.kubernetesVersion = `v1.${minor}.2-keelson-standin`;
  writeFileSync(manifestPath, JSON.stringify(manifest));
  packages.set(minor, dir);
  return dir;
}

function run(minor: number, binary: string, args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(join(packageFor(minor), "bin", binary), args, {
    encoding: "utf8",
    timeout: 20_000,
    env: { PATH: process.env.PATH ?? "", KEELSON_NODE_BIN: process.execPath, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const MINORS = [29, 30, 31];

describe("strict stand-ins: command lines", () => {
  for (const minor of MINORS) {
    it(`kubelet 1.${minor} exits 1 on --dynamic-config-dir (removed in 1.24) with the real kubelet's words`, () => {
      const r = run(minor, "kubelet", ["--config=/nonexistent", "--dynamic-config-dir=/var/lib/kubelet/dynamic"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /^E\d{4} [\d:.]+ +\d+ run\.go:74\] "command failed" err="failed to parse kubelet flag: unknown flag: --dynamic-config-dir"\n$/,
      );
    });
  }

  it("the kubelet refuses --node-labels in kubernetes.io outside its own set (node-role.kubernetes.io/*), in the real words", () => {
    const r = run(31, "kubelet", [
      "--config=/nonexistent",
      "--node-labels=keelson.io/cluster=c1,node-role.kubernetes.io/worker=,node.kubernetes.io/ok=1",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "failed to validate kubelet flags: unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/worker]",
    );
    expect(r.stderr).toContain("must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io)");
    // Labels outside kubernetes.io pass this check (the missing config file is what stops it then).
    const allowed = run(31, "kubelet", ["--config=/nonexistent", "--node-labels=keelson.io/cluster=c1"]);
    expect(allowed.stderr).not.toContain("--node-labels");
  });

  it("kube-apiserver and kube-proxy exit 1 on an unknown flag as cobra says it", () => {
    for (const binary of ["kube-apiserver", "kube-proxy"]) {
      const r = run(30, binary, ["--no-such-flag=1"]);
      expect(r.code, binary).toBe(1);
      expect(r.stderr.split("\n")[0], binary).toBe("Error: unknown flag: --no-such-flag");
    }
  });

  it("flags removed in a minor are refused from that minor on, kept before it", () => {
    // --azure-container-registry-config left kube-apiserver in 1.30.
    const args = ["--azure-container-registry-config=/x", "--bind-address=127.0.0.1"];
    expect(run(30, "kube-apiserver", args).stderr).toMatch(/^Error: unknown flag: --azure-container-registry-config/);
    expect(run(29, "kube-apiserver", args).stderr).not.toMatch(/unknown flag/);
  });

  it("kube-apiserver exits 1 without the service-account flags required since 1.20, in the real words", () => {
    const r = run(31, "kube-apiserver", ["--bind-address=127.0.0.1", "--tls-private-key-file=/x.key"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      '"command failed" err="[service-account-issuer is a required flag, --service-account-signing-key-file and --service-account-issuer are required flags]"',
    );
  });

  it("kube-apiserver refuses an authorization mode it does not know", () => {
    const r = run(29, "kube-apiserver", [
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--service-account-signing-key-file=/dev/null",
      "--service-account-key-file=/dev/null",
      "--authorization-mode=Node,Everything",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('authorization-mode \\"Everything\\" is not a valid mode');
  });

  it("--version answers the package's Kubernetes version, as the real binaries do", () => {
    expect(run(31, "kubelet", ["--version"])).toMatchObject({
      code: 0,
      stdout: "Kubernetes v1.31.2-keelson-standin\n",
    });
    expect(run(29, "kube-proxy", ["--version"]).stdout).toBe("Kubernetes v1.29.2-keelson-standin\n");
  });

  it("coredns refuses an unknown flag as Go's flag package does (exit 2)", () => {
    const r = run(29, "coredns", ["-conf", "/x", "-dns-port=53"]);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe("flag provided but not defined: -dns-port");
  });

  it("the kubelet takes --config-dir from 1.30; 1.29 refuses it unless its alpha switch is set", () => {
    const args = ["--config=/nonexistent.json", "--config-dir=/nonexistent.d", "--kubeconfig=/x"];
    const r29 = run(29, "kubelet", args);
    expect(r29.code).toBe(1);
    expect(r29.stderr).toContain("KUBELET_CONFIG_DROPIN_DIR_ALPHA");
    // 1.30 gets past the flags and fails on the missing config file instead.
    const r30 = run(30, "kubelet", args);
    expect(r30.code).toBe(1);
    expect(r30.stderr).not.toContain("KUBELET_CONFIG_DROPIN_DIR_ALPHA");
    expect(r30.stderr).toContain("failed to load kubelet config file, path: /nonexistent.json");
  });
});

interface KubeletConfigModule {
  decodeKubeletConfig(path: string, minor: number): { config: Record<string, unknown>; warnings: string[] };
  loadKubeletConfig(
    path: string,
    dir: string | undefined,
    minor: number,
  ): { config: Record<string, unknown>; warnings: string[] };
}

describe("strict stand-ins: the kubelet's configuration files", async () => {
  const mod = (await import(pathToFileURL(join(FIXTURE, "lib", "kubelet-config.mjs")).href)) as KubeletConfigModule;
  const dir = join(scratch, "kubelet-config");
  mkdirSync(join(dir, "conf.d"), { recursive: true });
  const head = { apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration" };
  const write = (name: string, body: unknown) => {
    writeFileSync(join(dir, name), JSON.stringify(body));
    return join(dir, name);
  };

  it("refuses a file of another kind or version, and one that does not parse", () => {
    expect(() =>
      mod.decodeKubeletConfig(write("v1.json", { ...head, apiVersion: "kubelet.config.k8s.io/v1" }), 30),
    ).toThrow(/no kind "KubeletConfiguration" is registered for version "kubelet.config.k8s.io\/v1"/);
    writeFileSync(join(dir, "broken.json"), "{");
    expect(() => mod.decodeKubeletConfig(join(dir, "broken.json"), 30)).toThrow(/failed to decode/);
  });

  it("reports an unknown field as the strict decoder does (v1beta1 then decodes leniently, as the real kubelet)", () => {
    const { config, warnings } = mod.decodeKubeletConfig(
      write("unknown.json", { ...head, maxPods: 50, dynamicConfigDir: "/x" }),
      29,
    );
    expect(warnings).toEqual(['strict decoding error: unknown field "dynamicConfigDir"']);
    expect(config).toEqual({ ...head, maxPods: 50 });
    // failCgroupV1 arrived in 1.31: unknown to 1.30, known to 1.31.
    const path = write("cgroupv1.json", { ...head, failCgroupV1: true });
    expect(mod.decodeKubeletConfig(path, 30).warnings).toEqual(['strict decoding error: unknown field "failCgroupV1"']);
    expect(mod.decodeKubeletConfig(path, 31).warnings).toEqual([]);
  });

  it("merges the --config-dir drop-ins over --config: *.conf only, in name order", () => {
    const base = write("base.json", {
      ...head,
      maxPods: 110,
      cpuManagerPolicy: "none",
      authentication: { anonymous: { enabled: false } },
    });
    write("conf.d/20-late.conf", { ...head, cpuManagerPolicy: "static" });
    write("conf.d/10-early.conf", {
      ...head,
      cpuManagerPolicy: "none",
      maxPods: 20,
      authentication: { webhook: { enabled: true } },
    });
    write("conf.d/99-ignored.json", { ...head, maxPods: 1 });
    const { config } = mod.loadKubeletConfig(base, join(dir, "conf.d"), 30);
    expect(config).toMatchObject({
      maxPods: 20,
      cpuManagerPolicy: "static",
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true } },
    });
  });
});

describe("strict stand-ins: kube-controller-manager and kube-scheduler", () => {
  for (const minor of MINORS) {
    it(`1.${minor}: each exits 1 on a removed flag as cobra says it`, () => {
      // --pod-eviction-timeout left the controller-manager in 1.27; --port (insecure serving) the scheduler in 1.24.
      const cm = run(minor, "kube-controller-manager", ["--leader-elect=true", "--pod-eviction-timeout=5m"]);
      expect(cm.code).toBe(1);
      expect(cm.stderr.split("\n")[0]).toBe("Error: unknown flag: --pod-eviction-timeout");
      const scheduler = run(minor, "kube-scheduler", ["--port=10251"]);
      expect(scheduler.code).toBe(1);
      expect(scheduler.stderr.split("\n")[0]).toBe("Error: unknown flag: --port");
    });
  }

  it("kube-scheduler: every flag of the stored 1.21 reference page that left by 1.29 is refused; the rest are taken", async () => {
    const { flagsFor } = await import(pathToFileURL(join(FIXTURE, "lib", "flags.mjs")).href);
    // Gone by 1.29 (the Policy API, insecure serving, klog's own flags), in the real words.
    for (const flag of ["--scheduler-name=x", "--lock-object-name=x", "--logtostderr", "--one-output"]) {
      const r = run(29, "kube-scheduler", [flag]);
      expect(r.code, flag).toBe(1);
      expect(r.stderr.split("\n")[0], flag).toBe(`Error: unknown flag: ${flag.split("=")[0]}`);
    }
    // Added after 1.21 and taken by every catalogue minor; 1.29 gets past the flags and fails on
    // the next thing it checks.
    const later = ["--log-text-split-stream", "--pod-max-in-unschedulable-pods-duration=5m"];
    for (const minor of MINORS) {
      for (const name of ["log-text-split-stream", "pod-max-in-unschedulable-pods-duration", "leader-elect"]) {
        expect(flagsFor("kube-scheduler", minor).has(name), `1.${minor} ${name}`).toBe(true);
      }
      const r = run(minor, "kube-scheduler", [...later, "--leader-elect-lease-duration=bogus"]);
      expect(r.stderr, `1.${minor}`).toContain('invalid leader election leaseDuration \\"bogus\\"');
    }
  });

  it("kube-controller-manager: the command line Keelson's master phase starts is taken by every catalogue minor", async () => {
    const { flagsFor } = await import(pathToFileURL(join(FIXTURE, "lib", "flags.mjs")).href);
    const config = nodeConfig({
      hostRoot: join(scratch, "kcm-host"),
      primaryIp: "127.0.0.42",
      cluster: { containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
    });
    for (const minor of MINORS) {
      const ctx = {
        config,
        paths: nodePaths(config.hostRoot),
        binary: (name: string) => join(packageFor(minor), "bin", name),
      } as unknown as PhaseContext;
      const { command, args } = controllerManagerSpec(ctx);
      expect(command).toBe(join(packageFor(minor), "bin", "kube-controller-manager"));
      const names = args.map((arg) => /^--([^=]+)=/.exec(arg)?.[1]);
      expect(names, `1.${minor}: every argument is --name=value`).not.toContain(undefined);
      const refused = names.filter((name) => !flagsFor("kube-controller-manager", minor).has(name));
      expect(refused, `1.${minor}`).toEqual([]);
      // The stand-in gets past the flags and stops on the first file it reads at start (none of
      // the master's files exist here): the phase's command line is not what it refuses.
      const r = run(minor, "kube-controller-manager", args);
      expect(r.code, `1.${minor}`).toBe(1);
      expect(r.stderr, `1.${minor}`).not.toContain("unknown flag");
      expect(r.stderr, `1.${minor}`).toContain(
        `error reading key for service account token controller: open ${ctx.paths.serviceAccountKey}: no such file`,
      );
    }
    // The page spells some flags with "_"; the binaries normalise it to "-" (and name an unknown
    // flag as given): 1.29 takes --concurrent_rc_syncs and refuses --log_dir.
    const spelled = run(29, "kube-controller-manager", [
      "--concurrent_rc_syncs=10",
      "--leader-elect-lease-duration=bogus",
    ]);
    expect(spelled.stderr).toContain('invalid leader election leaseDuration \\"bogus\\"');
    expect(run(29, "kube-controller-manager", ["--log_dir=/x"]).stderr.split("\n")[0]).toBe(
      "Error: unknown flag: --log_dir",
    );
    // A flag of the 1.21 page that left by 1.29 is refused by all three, in cobra's words.
    for (const flag of ["--deployment-controller-sync-period=30s", "--enable-taint-manager=true", "--log-dir=/x"]) {
      for (const minor of MINORS) {
        const r = run(minor, "kube-controller-manager", [flag]);
        expect(r.stderr.split("\n")[0], `1.${minor} ${flag}`).toBe(`Error: unknown flag: ${flag.split("=")[0]}`);
      }
    }
  });

  it("--azure-container-registry-config is taken by 1.29 and refused from 1.30", () => {
    for (const binary of ["kube-controller-manager", "kube-scheduler"]) {
      const flag = ["--azure-container-registry-config=/x", "--leader-elect-lease-duration=bogus"];
      expect(run(30, binary, flag).stderr, binary).toMatch(/^Error: unknown flag: --azure-container-registry-config/);
      // 1.29 gets past the flags and fails on the next thing it checks.
      expect(run(29, binary, flag).stderr, binary).toContain('invalid leader election leaseDuration \\"bogus\\"');
    }
  });

  it("kube-controller-manager refuses unreadable key files and a cluster CIDR smaller than a node's", () => {
    const r = run(31, "kube-controller-manager", [
      "--service-account-private-key-file=/nonexistent/sa.key",
      "--root-ca-file=/nonexistent/ca.crt",
      "--allocate-node-cidrs=true",
      "--cluster-cidr=10.20.0.0/25",
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "error reading key for service account token controller: open /nonexistent/sa.key: no such file or directory",
    );
    expect(r.stderr).toContain("error reading root-ca-file at /nonexistent/ca.crt");
    expect(r.stderr).toContain(
      "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family",
    );
  });

  it("kube-scheduler decodes --config strictly: unknown fields and removed versions are refused", () => {
    const dir = join(scratch, "scheduler");
    mkdirSync(dir, { recursive: true });
    const path = join(dir, "config.json");
    const head = { apiVersion: "kubescheduler.config.k8s.io/v1", kind: "KubeSchedulerConfiguration" };
    writeFileSync(path, JSON.stringify({ ...head, leaderElection: { leaderElect: true, leaseDurationn: "15s" } }));
    const r = run(30, "kube-scheduler", [`--config=${path}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      '"command failed" err="strict decoding error: unknown field \\"leaderElection.leaseDurationn\\""',
    );
    // v1beta3 was removed in 1.29.
    writeFileSync(path, JSON.stringify({ ...head, apiVersion: "kubescheduler.config.k8s.io/v1beta3" }));
    expect(run(29, "kube-scheduler", [`--config=${path}`]).stderr).toContain(
      'no kind \\"KubeSchedulerConfiguration\\" is registered for version \\"kubescheduler.config.k8s.io/v1beta3\\"',
    );
  });
});

describe("strict stand-ins: kube-proxy's and coredns's configuration files", () => {
  const dir = join(scratch, "configs");
  mkdirSync(dir, { recursive: true });

  it("kube-proxy refuses another kind and logs an unknown field as v1alpha1's lenient fallback does", () => {
    const path = join(dir, "proxy.json");
    writeFileSync(
      path,
      JSON.stringify({ apiVersion: "kubeproxy.config.k8s.io/v1alpha1", kind: "KubeletConfiguration" }),
    );
    const refused = run(30, "kube-proxy", [`--config=${path}`]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('failed to decode: no kind \\"KubeletConfiguration\\" is registered');
    const kubeconfig = join(dir, "none.kubeconfig");
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
        kind: "KubeProxyConfiguration",
        udpIdleTimeout: "250ms",
        clientConnection: { kubeconfig },
      }),
    );
    // Past the decoder (only a warning) it stops at the missing kubeconfig.
    const lenient = run(30, "kube-proxy", [`--config=${path}`]);
    expect(lenient.stderr).toMatch(
      /^I\d{4} .*"Using lenient decoding as strict decoding failed" err="strict decoding error: unknown field \\"udpIdleTimeout\\""/m,
    );
    expect(lenient.stderr).toContain(`kubeconfig ${kubeconfig} is missing`);
  });

  it("coredns refuses an unknown directive with Caddy's words and exit 1", () => {
    const path = join(dir, "Corefile");
    writeFileSync(path, ".:53 {\n    errors\n    health 127.0.0.1:18080\n    proxy . /etc/resolv.conf\n}\n");
    const r = run(29, "coredns", ["-conf", path]);
    expect(r.code).toBe(1);
    // coremain's mustLogFatal: log.Fatal with the logger switched to stderr.
    expect(r.stderr).toBe(`${path}:4 - Error during parsing: Unknown directive 'proxy'\n`);
    expect(r.stdout).toBe("");
  });

  it("coredns refuses in the kubernetes block what CoreDNS 1.11's setup refuses, in its words (plugin/kubernetes/setup.go)", () => {
    const path = join(dir, "Corefile.k8s");
    const refusal = (lines: string[]) => {
      writeFileSync(
        path,
        [
          ".:53 {",
          "    errors",
          "    health 127.0.0.1:18080",
          "    kubernetes cluster.local {",
          ...lines,
          "}",
          "",
        ].join("\n"),
      );
      const r = run(30, "coredns", ["-conf", path]);
      expect(r.code).toBe(1);
      return r.stderr;
    };
    const block = (...properties: string[]) => ["        endpoint https://127.0.0.1:1", ...properties, "    }"];
    const at = (line: number, message: string) =>
      `plugin/kubernetes: ${path}:${line} - Error during parsing: ${message}\n`;
    expect(refusal(block("        frobnicate yes"))).toBe(at(6, "unknown property 'frobnicate'"));
    // multicluster came with CoreDNS 1.12.2; 1.11.1 and 1.11.3 do not know it.
    expect(refusal(block("        multicluster clusterset.local"))).toBe(at(6, "unknown property 'multicluster'"));
    // Dispenser.ArgErr names the last token it read: the last argument, or the property itself.
    expect(refusal(block("        tls /a.crt /a.key"))).toBe(
      at(6, "Wrong argument count or unexpected line ending after '/a.key'"),
    );
    expect(refusal(block("        ttl"))).toBe(at(6, "Wrong argument count or unexpected line ending after 'ttl'"));
    expect(refusal(block("        ttl 4000"))).toBe(at(6, "ttl must be in range [0, 3600]: 4000"));
    // Errors made with fmt.Errorf carry no position.
    expect(refusal(block("        ttl 5s"))).toBe('plugin/kubernetes: strconv.Atoi: parsing "5s": invalid syntax\n');
    expect(refusal(block("        pods sometimes"))).toBe(
      "plugin/kubernetes: wrong value for pods: sometimes,  must be one of: disabled, verified, insecure\n",
    );
    expect(refusal(block("        ignore everything"))).toBe(
      "plugin/kubernetes: unable to parse ignore value: 'everything'\n",
    );
    // Properties are read in order: the first refusal is the one reported.
    expect(refusal(block("        pods sometimes", "        frobnicate yes"))).toContain("wrong value for pods");
    expect(refusal([...block(), "    kubernetes other.local {", ...block()])).toBe(
      "plugin/kubernetes: this plugin can only be used once per Server Block\n",
    );
    writeFileSync(path, ".:53 {\n    health 127.0.0.1:18080\n    kubernetes in-addr.arpa {\n    }\n}\n");
    expect(run(30, "coredns", ["-conf", path]).stderr).toBe("plugin/kubernetes: non-reverse zone name must be used\n");
  });

  it("coredns refuses in prometheus what CoreDNS 1.11's plugin/metrics setup.go refuses, in its words", () => {
    const path = join(dir, "Corefile.prometheus");
    const refusal = (line: string) => {
      writeFileSync(path, `.:53 {\n    errors\n    health 127.0.0.1:18080\n${line}\n}\n`);
      const r = run(30, "coredns", ["-conf", path]);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      return r.stderr;
    };
    // One optional address; more is the dispenser's ArgErr, naming the last token.
    expect(refusal("    prometheus a b")).toBe(
      `plugin/prometheus: ${path}:4 - Error during parsing: Wrong argument count or unexpected line ending after 'b'\n`,
    );
    // The address goes through Go's net.SplitHostPort, whose AddrError carries no position.
    expect(refusal("    prometheus 127.0.0.1")).toBe("plugin/prometheus: address 127.0.0.1: missing port in address\n");
    expect(refusal("    prometheus ::1:9153")).toBe(
      "plugin/prometheus: address ::1:9153: too many colons in address\n",
    );
    expect(refusal("    prometheus [::1:9153")).toBe("plugin/prometheus: address [::1:9153: missing ']' in address\n");
    expect(refusal("    prometheus :9153\n    prometheus :9154")).toBe(
      "plugin/prometheus: this plugin can only be used once per Server Block\n",
    );
    // What Keelson writes passes setup (it only stops later, at the kubernetes block's missing endpoint).
    expect(refusal("    prometheus 127.0.0.1:9153\n    kubernetes cluster.local")).toMatch(/^plugin\/kubernetes: /);
  });
});
