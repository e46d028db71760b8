import { isIP } from "node:net";
import { checkProxyUrl, proxyUrlText } from "@keelson/protocol";
import { CLUSTER_DOMAIN, type NodeConfig } from "../config.ts";
import { PhaseError } from "../types.ts";
import { registryEndpoint } from "./containerd-config.ts";

/**
 * The node's outbound proxy, from the cluster's `httpProxy` (spec §2.1, create-only): the
 * environment of the node components that reach outside the cluster. That is containerd alone:
 * it pulls the images (the CRI plugin's PullImage, in containerd's own process, with Go's
 * http.ProxyFromEnvironment), as the containerd and Docker documentation say for a proxied host
 * (HTTP_PROXY, HTTPS_PROXY, NO_PROXY in the daemon's environment). The kubelet pulls nothing
 * itself (it asks containerd over CRI) and Keelson configures no credential-provider plugin for
 * it; kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS and
 * keepalived only talk inside the cluster. kube-apiserver would even be hurt by one: it dials
 * every node's kubelet (logs, exec) and webhooks through ProxyFromEnvironment, and other nodes'
 * addresses are not in this NO_PROXY. (kubeadm copies any *_proxy into its control-plane pods;
 * Keelson does not, for that reason.)
 *
 * NO_PROXY keeps in-cluster traffic off the proxy (Go's rules: an IP, a CIDR block, a name and
 * its subdomains, a leading `.` for subdomains only): loopback, this node's address, the pod and
 * service ranges, the API server's address (this master's own, or the VIP, DNS name or master
 * workers are given), the cluster's DNS names, and the hosts of its private registries (a
 * registry inside the network is pulled from directly; the name alone, so every port of it
 * matches). The control plane's host is not in it: nothing
 * given this environment talks to the control plane; the agent, which does, routes by its own
 * HTTPS_PROXY/NO_PROXY (agent.env, link/proxy.ts).
 */

export type ProxyEnv = Partial<Record<"HTTP_PROXY" | "HTTPS_PROXY" | "NO_PROXY", string>>;

/** The proxy variables for containerd: none when the cluster has no proxy. */
export function nodeProxyEnv(config: NodeConfig): ProxyEnv {
  const proxy = config.cluster.httpProxy;
  if (!proxy) return {};
  const problem = checkProxyUrl(proxy);
  // The API refuses such a value; one stored before that rule stops here, named.
  if (problem) throw new PhaseError(`the cluster's httpProxy ${problem} (got "${proxy}")`);
  // With its scheme written out: Go reads host:port as http:// too, but one spelling everywhere.
  const url = proxyUrlText(proxy);
  return { HTTP_PROXY: url, HTTPS_PROXY: url, NO_PROXY: noProxyEntries(config).join(",") };
}

/** NO_PROXY's entries, each once, in a stable order (a reordered list would restart containerd). */
export function noProxyEntries(config: NodeConfig): string[] {
  const c = config.cluster;
  const candidates = [
    "localhost",
    "127.0.0.1",
    "::1",
    config.primaryIp,
    ...listed(c.containersCidr),
    ...listed(c.servicesCidr),
    new URL(config.apiServerUrl).hostname,
    c.masterVipIpv4,
    c.externalDnsName,
    ...[c.dockerPrivateRegistry, c.quayPrivateRegistry, c.gcrPrivateRegistry, c.k8sPrivateRegistry].map(registryHost),
    ".svc",
    `.${CLUSTER_DOMAIN}`,
  ];
  const entries = candidates.map((entry) => canonical(entry ?? "")).filter((entry) => entry !== "");
  return [...new Set(entries)];
}

/** The host name of a private registry field (`host[:port][/path]` or a URL), as containerd's mirror endpoint reads it. */
function registryHost(value: string | undefined): string | undefined {
  if (!value?.trim()) return undefined;
  try {
    return new URL(registryEndpoint(value.trim())).hostname;
  } catch {
    // No host to read from it: nothing to exempt (its mirror endpoint names no host either).
    return undefined;
  }
}

/** A field that may hold a comma-separated list (a dual-stack range pair). */
const listed = (value: string | undefined) => (value ?? "").split(",");

/** Lower case, no brackets or trailing dot; an IPv6 address in its one compressed form. */
function canonical(entry: string): string {
  const text = entry
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/(.)\.$/, "$1");
  return isIP(text) === 6 ? new URL(`http://[${text}]/`).hostname.slice(1, -1) : text;
}
