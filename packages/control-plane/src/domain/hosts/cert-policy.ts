import { isIP } from "node:net";
import { CERT_PROFILES, type CertProfile, nthAddress, parseIpv4Cidr } from "@keelson/protocol";
import type { CertificateUsage } from "../../pki/sign.ts";
import type { ClusterSpec } from "../clusters/spec/fields.ts";

/**
 * What a node may have signed by its cluster's CA (the agent's `cert.sign`). The agent proposes
 * a subject and names; this decides. Usages come from the profile, never from the CSR; the
 * organisation (Kubernetes groups) is fixed per profile; the common name must be the one the
 * profile gives this node; every SAN must belong to this node or, for the API server, to the
 * cluster's API endpoint. Anything else is refused with the reason, so a compromised host can
 * get nothing but certificates for itself.
 */

/** The Kubernetes service range when the cluster spec names none; the agent uses the same default. */
export const DEFAULT_SERVICES_CIDR = "10.21.0.0/16";

/** Only masters run these; a worker asking for one is refused. */
const MASTER_ONLY: ReadonlySet<CertProfile> = new Set([
  "apiserver",
  "bouncer",
  "etcd-server",
  "etcd-peer",
  "etcd-client",
  "apiserver-kubelet-client",
  "kube-controller-manager",
  "kube-scheduler",
]);

const API_SERVICE_NAMES = [
  "kubernetes",
  "kubernetes.default",
  "kubernetes.default.svc",
  "kubernetes.default.svc.cluster.local",
];

export interface SigningNode {
  hostId: string;
  /** The host name the agent reported. */
  name: string;
  primaryIp: string;
  isMaster: boolean;
}

export interface SigningCluster {
  spec: Pick<ClusterSpec, "masterVipIpv4" | "externalDnsName" | "servicesCidr">;
  /**
   * Host names and addresses of the cluster's other nodes. A node's name and address are its
   * own report, so a host that reports another node's name or IP (or the VIP) as its own must
   * not get a certificate naming it: that would let it act as that node's kubelet or etcd member.
   */
  otherNodes?: { name: string; primaryIp: string }[];
}

export interface CertProposal {
  profile: CertProfile;
  commonName: string | undefined;
  dnsNames: string[];
  ipAddresses: string[];
}

export type CertDecision =
  | {
      ok: true;
      subject: { commonName: string; organization?: string[] };
      dnsNames: string[];
      ipAddresses: string[];
      usages: CertificateUsage[];
    }
  | { ok: false; reason: string };

function text(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** Host-part 1 of an IPv4 CIDR (the `kubernetes` service's ClusterIP), or undefined. */
export function firstServiceIp(cidr: string): string | undefined {
  const parsed = parseIpv4Cidr(cidr.trim());
  return parsed.ok && parsed.block.prefix <= 30 ? nthAddress(parsed.block, 1) : undefined;
}

/** Names and addresses that belong to someone else in the cluster: other nodes, and the VIP. */
function takenNames(cluster: SigningCluster): Set<string> {
  const taken = new Set<string>();
  for (const other of cluster.otherNodes ?? []) {
    if (other.name) taken.add(other.name.toLowerCase());
    if (other.primaryIp) taken.add(other.primaryIp.toLowerCase());
  }
  const vip = text(cluster.spec.masterVipIpv4);
  if (vip) taken.add(vip.toLowerCase());
  return taken;
}

/** Names the node itself may carry in any certificate. */
function ownNames(node: SigningNode, taken: Set<string>): { dns: Set<string>; ips: Set<string> } {
  const dns = new Set(["localhost"]);
  const ips = new Set(["127.0.0.1"]);
  const mine = (n: string) => n !== "" && !taken.has(n.toLowerCase());
  if (mine(node.primaryIp)) ips.add(node.primaryIp.toLowerCase());
  if (mine(node.name) && isIP(node.name) === 0) dns.add(node.name.toLowerCase());
  else if (mine(node.name)) ips.add(node.name.toLowerCase());
  return { dns, ips };
}

/** The names by which clients reach the cluster's API server. */
function apiNames(cluster: SigningCluster): { dns: string[]; ips: string[] } {
  const dns = [...API_SERVICE_NAMES];
  const ips: string[] = [];
  const external = text(cluster.spec.externalDnsName);
  if (external) dns.push(external.toLowerCase());
  const vip = text(cluster.spec.masterVipIpv4);
  if (vip) ips.push(vip);
  const serviceIp = firstServiceIp(text(cluster.spec.servicesCidr) ?? DEFAULT_SERVICES_CIDR);
  if (serviceIp) ips.push(serviceIp);
  return { dns, ips };
}

/** The common names a profile allows for this node, and the organisation it gets. */
function subjectRule(
  profile: CertProfile,
  node: SigningNode,
  taken: Set<string>,
): { names: string[]; organization?: string[] } {
  // The Kubernetes node name is the host name, or the IP when the cluster does not use host names.
  const nodeNames = [...new Set([node.name, node.primaryIp].filter((n) => n !== "" && !taken.has(n.toLowerCase())))];
  switch (profile) {
    case "kubelet":
      return { names: nodeNames.map((n) => `system:node:${n}`), organization: ["system:nodes"] };
    case "kube-proxy":
      return { names: ["system:kube-proxy"] };
    case "apiserver":
      return { names: ["kube-apiserver"] };
    case "bouncer":
      return { names: ["keelson-node-bouncer"] };
    case "etcd-server":
    case "etcd-peer":
      return { names: nodeNames };
    case "etcd-client":
      return { names: ["kube-apiserver-etcd-client"], organization: ["system:masters"] };
    case "apiserver-kubelet-client":
      // kubeadm's identity for the same purpose: the kubelets' webhook authorizer lets it in.
      return { names: ["kube-apiserver-kubelet-client"], organization: ["system:masters"] };
    case "kube-controller-manager":
    case "kube-scheduler":
      // The user names the default RBAC policy binds to their ClusterRoles (no group).
      return { names: [`system:${profile}`] };
  }
}

export function decideCertificate(node: SigningNode, cluster: SigningCluster, proposal: CertProposal): CertDecision {
  const { profile } = proposal;
  if (MASTER_ONLY.has(profile) && !node.isMaster) {
    return { ok: false, reason: `profile ${profile} is for masters only; host ${node.hostId} is a worker` };
  }
  const taken = takenNames(cluster);
  const rule = subjectRule(profile, node, taken);
  const commonName = proposal.commonName ?? "";
  if (!rule.names.includes(commonName)) {
    return {
      ok: false,
      reason: `profile ${profile}: common name "${commonName}" is not allowed for this node (allowed: ${rule.names.join(", ")})`,
    };
  }
  const own = ownNames(node, taken);
  const allowedDns = new Set(own.dns);
  const allowedIps = new Set(own.ips);
  if (profile === "apiserver") {
    const api = apiNames(cluster);
    for (const d of api.dns) allowedDns.add(d);
    for (const ip of api.ips) allowedIps.add(ip);
  }
  const dnsNames = unique(proposal.dnsNames.map((d) => d.trim().toLowerCase()));
  const ipAddresses = unique(proposal.ipAddresses.map((ip) => ip.trim().toLowerCase()));
  const badDns = dnsNames.filter((d) => !allowedDns.has(d));
  const badIps = ipAddresses.filter((ip) => !allowedIps.has(ip));
  if (badDns.length > 0 || badIps.length > 0) {
    const names = [...badDns.map((d) => `DNS:${d}`), ...badIps.map((ip) => `IP:${ip}`)].join(", ");
    return {
      ok: false,
      reason:
        `profile ${profile}: ${names} ${badDns.length + badIps.length === 1 ? "is" : "are"} not this node's ` +
        `(a node's certificates may name only its own address and host name, 127.0.0.1 and localhost` +
        `${profile === "apiserver" ? ", and the cluster's API names: VIP, external DNS name, first service IP, kubernetes.default.svc" : ""})`,
    };
  }
  return {
    ok: true,
    subject: rule.organization ? { commonName, organization: rule.organization } : { commonName },
    dnsNames,
    ipAddresses,
    usages: [...CERT_PROFILES[profile].usages],
  };
}

function unique(values: string[]): string[] {
  return [...new Set(values.filter((v) => v !== ""))];
}
