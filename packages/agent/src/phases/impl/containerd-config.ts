import { existsSync } from "node:fs";
import { join } from "node:path";
import type { NodeConfig } from "../config.ts";
import type { NodePaths } from "../paths.ts";

/**
 * containerd's config.toml, in the version 2 format containerd 1.6 and 1.7 read. Everything it
 * keeps lives under the host root and it listens on its own socket, so it never meets a system
 * containerd on the same host.
 */

const HEADER = "Written by keelson-agent from the cluster spec; local changes are overwritten.";

/**
 * The cgroup driver of the kubelet (its KubeletConfiguration) and of containerd's runc
 * (`SystemdCgroup`): the two must agree or the kubelet refuses the runtime's pods.
 */
export const CGROUP_DRIVER: "systemd" | "cgroupfs" = "systemd";

/**
 * The pause (sandbox) image tag kubeadm pins for each Kubernetes minor (kubeadm's
 * constants.PauseVersion). The catalogue's role versions carry no sandbox image field, so the
 * agent derives it from the role version's minor; a minor past the table takes the newest entry.
 */
const PAUSE_BY_MINOR: [minor: number, tag: string][] = [
  [29, "3.9"],
  [30, "3.9"],
  [31, "3.10"],
];

export function pauseTag(kubeRoleVersion: string | undefined): string {
  const minor = Number(/^v?1\.(\d+)\./.exec(kubeRoleVersion ?? "")?.[1]);
  let tag = PAUSE_BY_MINOR[0]![1];
  for (const [m, t] of PAUSE_BY_MINOR) if (Number.isFinite(minor) && minor >= m) tag = t;
  return tag;
}

/** "registry.example.com:5000" or a URL to an endpoint URL. */
export function registryEndpoint(value: string): string {
  return /^https?:\/\//.test(value) ? value.replace(/\/+$/, "") : `https://${value.replace(/\/+$/, "")}`;
}

function tomlString(value: string): string {
  return JSON.stringify(value);
}

export function sandboxImage(config: NodeConfig): string {
  const c = config.cluster;
  const registry = c.k8sPrivateRegistry
    ? registryEndpoint(c.k8sPrivateRegistry).replace(/^https?:\/\//, "")
    : "registry.k8s.io";
  return `${registry}/pause:${pauseTag(c.kubeRoleVersion)}`;
}

/**
 * Where the CNI plugins are: the node package's cni/ directory when it has one, else the
 * distribution's (Debian's containernetworking-plugins: /usr/lib/cni), else the upstream default.
 */
export function cniBinDir(config: NodeConfig): string {
  const dirs = [join(config.nodePackage, "cni"), "/usr/lib/cni", "/opt/cni/bin"];
  return dirs.find((dir) => existsSync(dir)) ?? dirs[2]!;
}

/** The node package's runc when it ships one; otherwise containerd finds runc on its PATH. */
function runcBinary(config: NodeConfig): string | undefined {
  const runc = join(config.nodePackage, "bin", "runc");
  return existsSync(runc) ? runc : undefined;
}

/** containerd's config.toml: its paths, the CRI settings, CNI, and a mirror per private registry. */
export function renderContainerdConfig(config: NodeConfig, paths: NodePaths): string {
  const c = config.cluster;
  const mirrors: [string, string | undefined][] = [
    ["docker.io", c.dockerPrivateRegistry],
    ["quay.io", c.quayPrivateRegistry],
    ["gcr.io", c.gcrPrivateRegistry],
    ["registry.k8s.io", c.k8sPrivateRegistry],
    ["k8s.gcr.io", c.k8sPrivateRegistry],
  ];
  const cri = '[plugins."io.containerd.grpc.v1.cri"]';
  const lines = [
    `# ${HEADER}`,
    "version = 2",
    `root = ${tomlString(paths.containerdRoot)}`,
    `state = ${tomlString(paths.containerdState)}`,
    "",
    "[grpc]",
    `  address = ${tomlString(paths.containerdSocket)}`,
    "",
    // The opt plugin would otherwise install into /opt/containerd, outside the host root.
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${tomlString(join(paths.containerdRoot, "opt"))}`,
    "",
    cri,
    `  sandbox_image = ${tomlString(sandboxImage(config))}`,
    "  enable_unprivileged_ports = false",
    `${cri.slice(0, -1)}.cni]`,
    `  bin_dir = ${tomlString(cniBinDir(config))}`,
    `  conf_dir = ${tomlString(paths.cniConfDir)}`,
    `${cri.slice(0, -1)}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `${cri.slice(0, -1)}.containerd.runtimes.runc.options]`,
    `  SystemdCgroup = ${CGROUP_DRIVER === "systemd"}`,
    // runc's state beside containerd's (its default, /run/containerd/runc, is outside the host root).
    `  Root = ${tomlString(join(paths.containerdState, "runc"))}`,
  ];
  const runc = runcBinary(config);
  if (runc) lines.push(`  BinaryName = ${tomlString(runc)}`);
  if (c.dockerLiveRestoreEnabled !== undefined) {
    // containerd has no live-restore switch: its shims keep containers running while it
    // restarts, which is what live restore means for docker. Recorded so the intent is visible.
    lines.push(
      `# live restore requested: ${c.dockerLiveRestoreEnabled} (containerd keeps containers running across restarts)`,
    );
  }
  for (const [registry, mirror] of mirrors) {
    if (!mirror) continue;
    lines.push(
      `${cri.slice(0, -1)}.registry.mirrors.${tomlString(registry)}]`,
      `  endpoint = [${tomlString(registryEndpoint(mirror))}]`,
    );
  }
  return `${lines.join("\n")}\n`;
}
