import { resolve } from "node:path";
import { type NodeRole, urlHost } from "@keelson/protocol";

/**
 * What the phases need to know about this node and its cluster. The control plane sends it
 * when it attaches the node; the cluster fields keep the names of the cluster spec (§2.1) so
 * the control plane can copy them straight from its stored spec.
 */

export interface ClusterSettings {
  kubeRoleVersion?: string;
  containersCidr: string;
  servicesCidr: string;
  networkPlugin: "flannel" | "calico" | "weave" | "noop";
  mtuSize?: string;
  calicoIpIpMode?: "Always" | "Never" | "CrossSubnet";
  calicoNatOutgoing?: boolean;
  calicoV4BlockSize?: string;
  allowWorkloadsOnMaster?: 0 | 1 | boolean;
  privileged?: boolean;
  masterVipIpv4?: string;
  masterVipIface?: string;
  masterVipVrouterId?: string;
  /** API server port as the spec stores it (a decimal string); default 443. */
  k8sApiPort?: string;
  externalDnsName?: string;
  /** The proxy the node reaches outside the cluster through (create-only); node-proxy.ts. */
  httpProxy?: string;
  runtimeConfig?: string;
  etcdHeartbeatIntervalMs?: number;
  etcdElectionTimeoutMs?: number;
  cpuManagerPolicy?: "none" | "static";
  topologyManagerPolicy?: "none" | "best-effort" | "restricted" | "single-numa-node";
  reservedCPUs?: string;
  dockerPrivateRegistry?: string;
  quayPrivateRegistry?: string;
  gcrPrivateRegistry?: string;
  k8sPrivateRegistry?: string;
  dockerLiveRestoreEnabled?: boolean;
  dockerCentosPackageRepoUrl?: string;
  dockerUbuntuPackageRepoUrl?: string;
  containerRuntime?: "containerd" | "docker";
}

/** The cluster's DNS domain: the kubelet's clusterDomain, CoreDNS's zone, the API's service name. */
export const CLUSTER_DOMAIN = "cluster.local";

/** Ports every service binds on the node's primary IP; tests pick free ones. */
export interface ServicePorts {
  etcdClient: number;
  etcdPeer: number;
  apiServer: number;
  kubelet: number;
  kubeletHealthz: number;
  kubeProxyHealthz: number;
  kubeProxyMetrics: number;
  bouncer: number;
  corednsHealth: number;
  corednsReady: number;
  /** CoreDNS's prometheus plugin (/metrics): 9153, the port the kube-dns Service names "metrics". */
  corednsMetrics: number;
  /** CoreDNS's DNS port (UDP and TCP): 53 in production; tests pick a free one. */
  corednsDns: number;
  /** kube-controller-manager's and kube-scheduler's secure ports (/healthz, /metrics). */
  controllerManager: number;
  scheduler: number;
}

export const DEFAULT_PORTS: Omit<ServicePorts, "apiServer"> = {
  etcdClient: 2379,
  etcdPeer: 2380,
  kubelet: 10250,
  kubeletHealthz: 10248,
  kubeProxyHealthz: 10256,
  kubeProxyMetrics: 10249,
  bouncer: 5443,
  corednsHealth: 8080,
  corednsReady: 8181,
  corednsMetrics: 9153,
  corednsDns: 53,
  controllerManager: 10257,
  scheduler: 10259,
};

export interface BouncerToken {
  /** Hex sha256 of the bearer token: the bouncer never holds the tokens themselves. */
  sha256: string;
  username: string;
  groups?: string[];
}

export interface HostChecks {
  /** Where /proc is read from (swaps, modules, sys); tests point it at a fake tree. */
  procRoot: string;
  /** Where /sys is read from (built-in modules show under <sysRoot>/module). */
  sysRoot: string;
  /** Where `<kernel release>/modules.builtin` is read from (/lib/modules). */
  modulesRoot: string;
  /**
   * Load modules and set sysctls on the running kernel, not only in /etc: only when the agent
   * manages the real host (host root /), so a test host never changes the machine's kernel.
   */
  applyLive: boolean;
  requiredModules: string[];
  /** sysctl name (dotted) -> required value. */
  requiredSysctls: Record<string, string>;
}

export interface Timeouts {
  /** A started service has this long to pass its health probe. */
  serviceStartMs: number;
  /** The wait-for-services phase waits this long for everything at once. */
  waitForServicesMs: number;
  /** Any single command (openssl, etcdctl, ctr). */
  commandMs: number;
  /** SIGTERM grace before SIGKILL. */
  serviceStopMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = {
  serviceStartMs: 30_000,
  waitForServicesMs: 120_000,
  commandMs: 30_000,
  serviceStopMs: 10_000,
};

export interface NodeConfig {
  clusterId: string;
  nodeId: string;
  /** The Kubernetes node name (hostname, or the IP when the cluster does not use hostnames). */
  nodeName: string;
  role: NodeRole;
  primaryIp: string;
  /** The node package: `bin/` holds etcd, kubelet, ... */
  nodePackage: string;
  /** Prefix of every path the phases write (KEELSON_HOST_ROOT). */
  hostRoot: string;
  cluster: ClusterSettings;
  /**
   * Client URLs of the etcd members that already exist when this master joins. Empty on the
   * first master, which bootstraps a new cluster.
   */
  etcdPeers: string[];
  /** The apiserver workers talk to (the VIP or a master); masters default to their own. */
  apiServerUrl: string;
  ports: ServicePorts;
  bouncer: { tokens: BouncerToken[]; verifyUrl?: string };
  host: HostChecks;
  timeouts: Timeouts;
  /** Where keepalived is looked for when the node package has none. */
  systemBinDirs: string[];
}

export type NodeConfigInput = Omit<
  NodeConfig,
  "cluster" | "ports" | "bouncer" | "host" | "timeouts" | "etcdPeers" | "apiServerUrl" | "systemBinDirs"
> & {
  cluster: Partial<ClusterSettings>;
  etcdPeers?: string[];
  apiServerUrl?: string;
  ports?: Partial<ServicePorts>;
  bouncer?: { tokens?: BouncerToken[]; verifyUrl?: string };
  host?: Partial<HostChecks>;
  timeouts?: Partial<Timeouts>;
  systemBinDirs?: string[];
};

export const DEFAULT_MODULES = ["overlay", "br_netfilter"];
export const DEFAULT_SYSCTLS: Record<string, string> = {
  "net.bridge.bridge-nf-call-iptables": "1",
  "net.bridge.bridge-nf-call-ip6tables": "1",
  "net.ipv4.ip_forward": "1",
};

export function resolveNodeConfig(input: NodeConfigInput): NodeConfig {
  const cluster: ClusterSettings = {
    ...input.cluster,
    containersCidr: input.cluster.containersCidr || "10.20.0.0/16",
    servicesCidr: input.cluster.servicesCidr || "10.21.0.0/16",
    networkPlugin: input.cluster.networkPlugin ?? "flannel",
  };
  const apiServer = input.ports?.apiServer ?? Number(cluster.k8sApiPort || 443);
  const ports: ServicePorts = { ...DEFAULT_PORTS, apiServer, ...input.ports };
  const primaryHost = urlHost(input.primaryIp);
  return {
    ...input,
    nodePackage: resolve(input.nodePackage),
    hostRoot: resolve(input.hostRoot),
    cluster,
    etcdPeers: input.etcdPeers ?? [],
    apiServerUrl: input.apiServerUrl ?? `https://${primaryHost}:${ports.apiServer}`,
    ports,
    bouncer: { tokens: input.bouncer?.tokens ?? [], verifyUrl: input.bouncer?.verifyUrl },
    host: {
      procRoot: input.host?.procRoot ?? "/proc",
      sysRoot: input.host?.sysRoot ?? "/sys",
      modulesRoot: input.host?.modulesRoot ?? "/lib/modules",
      applyLive: input.host?.applyLive ?? resolve(input.hostRoot) === "/",
      requiredModules: input.host?.requiredModules ?? DEFAULT_MODULES,
      requiredSysctls: input.host?.requiredSysctls ?? DEFAULT_SYSCTLS,
    },
    timeouts: { ...DEFAULT_TIMEOUTS, ...input.timeouts },
    systemBinDirs: input.systemBinDirs ?? ["/usr/sbin", "/usr/bin", "/sbin", "/bin"],
  };
}

export function allowsWorkloadsOnMaster(cluster: ClusterSettings): boolean {
  return cluster.allowWorkloadsOnMaster === 1 || cluster.allowWorkloadsOnMaster === true;
}
