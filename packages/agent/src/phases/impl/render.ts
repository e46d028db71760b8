import { cpus } from "node:os";
import { type CertProfile, nthAddress, urlHost } from "@keelson/protocol";
import { renderEnvFile } from "../../services/env-file.ts";
import { allowsWorkloadsOnMaster, CLUSTER_DOMAIN, type NodeConfig } from "../config.ts";
import type { NodePaths } from "../paths.ts";
import { PhaseError } from "../types.ts";
import type { DesiredFile } from "./common.ts";
import { CGROUP_DRIVER, registryEndpoint, renderContainerdConfig } from "./containerd-config.ts";
import { clusterRange } from "./net.ts";

/**
 * The node's configuration files, rendered from the node config alone (pure functions), so a
 * status check can render again and compare: a file edited by hand, or a cluster setting that
 * changed, shows as drift and the reconcile loop rewrites it. Kubernetes configuration files
 * are written as JSON, which every YAML reader (and the kubelet) accepts.
 */

const HEADER = "Written by keelson-agent from the cluster spec; local changes are overwritten.";

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

export function clusterDnsIp(config: NodeConfig): string {
  return nthAddress(clusterRange(config.cluster.servicesCidr, "servicesCidr"), 10);
}

/** Every node setting in one env file, for scripts and for the operator to read. */
export function renderNodeEnv(config: NodeConfig): string {
  const c = config.cluster;
  return renderEnvFile(
    {
      KEELSON_CLUSTER_ID: config.clusterId,
      KEELSON_NODE_ID: config.nodeId,
      NODE_NAME: config.nodeName,
      ROLE: config.role,
      PRIMARY_IP: config.primaryIp,
      API_SERVER_URL: config.apiServerUrl,
      K8S_API_PORT: String(config.ports.apiServer),
      KUBE_ROLE_VERSION: c.kubeRoleVersion,
      CONTAINERS_CIDR: c.containersCidr,
      SERVICES_CIDR: c.servicesCidr,
      CLUSTER_DNS_IP: clusterDnsIp(config),
      NETWORK_PLUGIN: c.networkPlugin,
      MTU: c.mtuSize,
      CALICO_IPIP_MODE: c.calicoIpIpMode,
      CALICO_NAT_OUTGOING: c.calicoNatOutgoing,
      CALICO_V4_BLOCK_SIZE: c.calicoV4BlockSize,
      ALLOW_WORKLOADS_ON_MASTER: allowsWorkloadsOnMaster(c) ? "1" : "0",
      PRIVILEGED: c.privileged ? "1" : "0",
      MASTER_VIP_IPV4: c.masterVipIpv4,
      MASTER_VIP_IFACE: c.masterVipIface,
      MASTER_VIP_VROUTER_ID: c.masterVipVrouterId,
      EXTERNAL_DNS_NAME: c.externalDnsName,
      RUNTIME_CONFIG: c.runtimeConfig,
      CONTAINER_RUNTIME: c.containerRuntime ?? "containerd",
      CPU_MANAGER_POLICY: c.cpuManagerPolicy ?? "none",
      TOPOLOGY_MANAGER_POLICY: c.topologyManagerPolicy ?? "none",
      RESERVED_CPUS: c.reservedCPUs,
      ETCD_HEARTBEAT_INTERVAL_MS: c.etcdHeartbeatIntervalMs,
      ETCD_ELECTION_TIMEOUT_MS: c.etcdElectionTimeoutMs,
      DOCKER_PRIVATE_REGISTRY: c.dockerPrivateRegistry,
      QUAY_PRIVATE_REGISTRY: c.quayPrivateRegistry,
      GCR_PRIVATE_REGISTRY: c.gcrPrivateRegistry,
      K8S_PRIVATE_REGISTRY: c.k8sPrivateRegistry,
      DOCKER_LIVE_RESTORE:
        c.dockerLiveRestoreEnabled === undefined ? undefined : c.dockerLiveRestoreEnabled ? "1" : "0",
    },
    HEADER,
  );
}

/** "0-1,4" to [0, 1, 4]; throws on anything else. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.split(",").map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) throw new PhaseError(`reservedCPUs "${text}": "${part}" is not a CPU number or range (like 0-1,4)`);
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from) throw new PhaseError(`reservedCPUs "${text}": range ${part} runs backwards`);
    for (let cpu = from; cpu <= to; cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The CPU/topology part of the kubelet configuration, checked against this host's CPUs. */
export function cpuSettings(config: NodeConfig, hostCpuCount = cpus().length): Record<string, string> {
  const c = config.cluster;
  const policy = c.cpuManagerPolicy ?? "none";
  const settings: Record<string, string> = {
    cpuManagerPolicy: policy,
    topologyManagerPolicy: c.topologyManagerPolicy ?? "none",
  };
  if (c.reservedCPUs) {
    const reserved = parseCpuList(c.reservedCPUs);
    const beyond = reserved.filter((cpu) => cpu >= hostCpuCount);
    if (beyond.length > 0) {
      throw new PhaseError(
        `reservedCPUs "${c.reservedCPUs}" names CPU ${beyond.join(", ")}, but this host has ${hostCpuCount} CPU(s) (0-${hostCpuCount - 1})`,
      );
    }
    if (reserved.length >= hostCpuCount) {
      throw new PhaseError(
        `reservedCPUs "${c.reservedCPUs}" reserves every CPU of this host; leave at least one for pods`,
      );
    }
    settings.reservedSystemCPUs = c.reservedCPUs;
  } else if (policy === "static") {
    throw new PhaseError(
      "cpuManagerPolicy static needs reservedCPUs (the kubelet refuses static without a reservation)",
    );
  }
  return settings;
}

export function renderKubeletConfig(config: NodeConfig, paths: NodePaths): string {
  return json({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    address: config.primaryIp,
    port: config.ports.kubelet,
    healthzBindAddress: config.primaryIp,
    healthzPort: config.ports.kubeletHealthz,
    tlsCertFile: paths.cert("kubelet"),
    tlsPrivateKeyFile: paths.key("kubelet"),
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: paths.caCert },
    },
    authorization: { mode: "Webhook" },
    clusterDomain: CLUSTER_DOMAIN,
    clusterDNS: [clusterDnsIp(config)],
    containerRuntimeEndpoint: `unix://${paths.containerdSocket}`,
    cgroupDriver: CGROUP_DRIVER,
    failSwapOn: true,
    staticPodPath: paths.manifests,
    ...cpuSettings(config),
  });
}

/** A kubeconfig with the client certificate of `profile`, for the cluster's API (or `server`). */
export function renderKubeconfig(
  config: NodeConfig,
  paths: NodePaths,
  user: string,
  profile: CertProfile,
  server = config.apiServerUrl,
): string {
  return json({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "keelson", cluster: { server, "certificate-authority": paths.caCert } }],
    users: [{ name: user, user: { "client-certificate": paths.cert(profile), "client-key": paths.key(profile) } }],
    contexts: [{ name: "default", context: { cluster: "keelson", user } }],
    "current-context": "default",
  });
}

export function renderKubeProxyConfig(config: NodeConfig, paths: NodePaths): string {
  const host = config.primaryIp;
  return json({
    apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
    kind: "KubeProxyConfiguration",
    bindAddress: host,
    healthzBindAddress: `${host}:${config.ports.kubeProxyHealthz}`,
    metricsBindAddress: `${host}:${config.ports.kubeProxyMetrics}`,
    clusterCIDR: config.cluster.containersCidr,
    hostnameOverride: config.nodeName,
    mode: "iptables",
    clientConnection: { kubeconfig: paths.kubeProxyKubeconfig },
  });
}

/**
 * KubeSchedulerConfiguration v1 (kubescheduler.config.k8s.io/v1, the only version 1.29-1.31
 * serve; the scheduler decodes it strictly, so only fields of that type).
 */
export function renderSchedulerConfig(paths: NodePaths): string {
  return json({
    apiVersion: "kubescheduler.config.k8s.io/v1",
    kind: "KubeSchedulerConfiguration",
    clientConnection: { kubeconfig: paths.schedulerKubeconfig },
    leaderElection: { leaderElect: true },
  });
}

/**
 * A master's controller-manager and scheduler files: their kubeconfigs name this master's own
 * API server (as kubeadm's do), so they work while the VIP or other masters are away.
 */
function controllerFiles(config: NodeConfig, paths: NodePaths): DesiredFile[] {
  if (config.role !== "master") return [];
  const local = `https://${urlHost(config.primaryIp)}:${config.ports.apiServer}`;
  return [
    {
      path: paths.controllerManagerKubeconfig,
      content: renderKubeconfig(config, paths, "system:kube-controller-manager", "kube-controller-manager", local),
      mode: 0o600,
    },
    {
      path: paths.schedulerKubeconfig,
      content: renderKubeconfig(config, paths, "system:kube-scheduler", "kube-scheduler", local),
      mode: 0o600,
    },
    { path: paths.schedulerConfig, content: renderSchedulerConfig(paths) },
  ];
}

export function prepareConfigFiles(config: NodeConfig, paths: NodePaths): DesiredFile[] {
  return [
    { path: paths.nodeEnv, content: renderNodeEnv(config) },
    { path: paths.kubeletConfig, content: renderKubeletConfig(config, paths) },
    {
      path: paths.kubeletKubeconfig,
      content: renderKubeconfig(config, paths, `system:node:${config.nodeName}`, "kubelet"),
      mode: 0o600,
    },
    { path: paths.kubeProxyConfig, content: renderKubeProxyConfig(config, paths) },
    {
      path: paths.kubeProxyKubeconfig,
      content: renderKubeconfig(config, paths, "system:kube-proxy", "kube-proxy"),
      mode: 0o600,
    },
    ...controllerFiles(config, paths),
  ];
}

export function renderDockerDaemonJson(config: NodeConfig): string {
  const c = config.cluster;
  return json({
    "exec-opts": [`native.cgroupdriver=${CGROUP_DRIVER}`],
    "live-restore": c.dockerLiveRestoreEnabled ?? false,
    ...(c.dockerPrivateRegistry ? { "registry-mirrors": [registryEndpoint(c.dockerPrivateRegistry)] } : {}),
  });
}

/** Package repositories for the container runtime, listed first so they win over the distro's. */
export function renderRepoFiles(config: NodeConfig, paths: NodePaths): { present: DesiredFile[]; absent: string[] } {
  const c = config.cluster;
  const present: DesiredFile[] = [];
  const absent: string[] = [];
  if (c.dockerUbuntuPackageRepoUrl) {
    present.push({
      path: paths.aptDockerList,
      content: `# ${HEADER}\ndeb ${c.dockerUbuntuPackageRepoUrl} stable main\n`,
    });
  } else absent.push(paths.aptDockerList);
  if (c.dockerCentosPackageRepoUrl) {
    present.push({
      path: paths.yumDockerRepo,
      content: `# ${HEADER}\n[keelson-docker]\nname=Docker packages (Keelson mirror)\nbaseurl=${c.dockerCentosPackageRepoUrl}\nenabled=1\npriority=1\ngpgcheck=1\n`,
    });
  } else absent.push(paths.yumDockerRepo);
  return { present, absent };
}

export function runtimeFiles(config: NodeConfig, paths: NodePaths): { present: DesiredFile[]; absent: string[] } {
  const repos = renderRepoFiles(config, paths);
  const present: DesiredFile[] = [
    { path: paths.containerdConfig, content: renderContainerdConfig(config, paths) },
    ...repos.present,
  ];
  const absent = [...repos.absent];
  if (config.cluster.containerRuntime === "docker") {
    present.push({ path: paths.dockerDaemonJson, content: renderDockerDaemonJson(config) });
  } else absent.push(paths.dockerDaemonJson);
  return { present, absent };
}
