import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { blockContains, blocksOverlap, parseIpv4 } from "@keelson/protocol";
import { renderEnvFile } from "../../services/env-file.ts";
import type { NodeConfig } from "../config.ts";
import type { NodePaths } from "../paths.ts";
import { type PhaseContext, PhaseError } from "../types.ts";
import { type DesiredFile, definePhase, expectFiles, writeFiles } from "./common.ts";
import { clusterRange, tryBind } from "./net.ts";

/**
 * Network configuration checks the cluster's ranges against each other and this host (the
 * primary IP must be an address of this host, outside both ranges) and records them in
 * network.env. Configure CNI plugin writes the CNI configuration of the cluster's plugin with
 * its CIDR and MTU; `noop` writes none, and says so.
 */

function mtuOf(config: NodeConfig): number | undefined {
  const text = config.cluster.mtuSize;
  if (text === undefined || text === "") return undefined;
  const mtu = Number(text);
  if (!Number.isInteger(mtu) || mtu < 576 || mtu > 9216) {
    throw new PhaseError(`mtuSize "${text}" must be an integer from 576 to 9216`);
  }
  return mtu;
}

async function checkNetwork(ctx: PhaseContext): Promise<DesiredFile> {
  const { config } = ctx;
  const containers = clusterRange(config.cluster.containersCidr, "containersCidr");
  const services = clusterRange(config.cluster.servicesCidr, "servicesCidr");
  if (blocksOverlap(containers, services)) {
    throw new PhaseError(
      `containersCidr ${config.cluster.containersCidr} and servicesCidr ${config.cluster.servicesCidr} overlap; choose disjoint ranges`,
    );
  }
  const ip = parseIpv4(config.primaryIp);
  if (ip !== undefined) {
    for (const [cidr, text] of [
      [containers, config.cluster.containersCidr],
      [services, config.cluster.servicesCidr],
    ] as const) {
      if (blockContains(cidr, ip)) {
        throw new PhaseError(
          `the node's primary IP ${config.primaryIp} lies inside ${text}; the cluster ranges must not contain host addresses`,
        );
      }
    }
  }
  const bind = await tryBind(config.primaryIp, 0);
  if (bind === "EADDRNOTAVAIL") {
    throw new PhaseError(
      `the primary IP ${config.primaryIp} is not an address of this host (binding to it fails); set KEELSON_PRIMARY_IP to one of its addresses`,
    );
  }
  if (bind) throw new PhaseError(`cannot bind to the primary IP ${config.primaryIp}: ${bind}`);
  return {
    path: ctx.paths.networkEnv,
    content: renderEnvFile(
      {
        PRIMARY_IP: config.primaryIp,
        CONTAINERS_CIDR: config.cluster.containersCidr,
        SERVICES_CIDR: config.cluster.servicesCidr,
        NETWORK_PLUGIN: config.cluster.networkPlugin,
        MTU: mtuOf(config),
      },
      "Written by keelson-agent (network-config).",
    ),
  };
}

export const networkConfig = definePhase({
  id: "network-config",
  async start(ctx) {
    writeFiles([await checkNetwork(ctx)]);
    return undefined;
  },
  async stop() {
    return undefined;
  },
  async status(ctx) {
    expectFiles([await checkNetwork(ctx)]);
    return undefined;
  },
});

const PORTMAP = { type: "portmap", capabilities: { portMappings: true } };
const KEELSON_CNI = /^10-keelson-.*\.conflist$/;

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** The CNI files of the cluster's plugin (empty for noop). */
export function cniFiles(config: NodeConfig, paths: NodePaths): DesiredFile[] {
  const { networkPlugin, containersCidr } = config.cluster;
  const mtu = mtuOf(config);
  const conflist = (name: string, plugins: unknown[]) => ({
    path: join(paths.cniConfDir, `10-keelson-${networkPlugin}.conflist`),
    content: json({ cniVersion: "0.3.1", name, plugins }),
  });
  switch (networkPlugin) {
    case "flannel":
      return [
        conflist("cbr0", [
          { type: "flannel", delegate: { hairpinMode: true, isDefaultGateway: true, ...(mtu ? { mtu } : {}) } },
          PORTMAP,
        ]),
        // flanneld reads the cluster network from net-conf.json (the kube-flannel-cfg contents).
        {
          path: join(paths.root, "etc", "kube-flannel", "net-conf.json"),
          content: json({ Network: containersCidr, Backend: { Type: "vxlan" } }),
        },
      ];
    case "calico":
      return [
        conflist("k8s-pod-network", [
          {
            type: "calico",
            log_level: "info",
            datastore_type: "kubernetes",
            mtu: mtu ?? 1440,
            ipam: { type: "calico-ipam", assign_ipv4: "true", ipv4_pools: [containersCidr] },
            policy: { type: "k8s" },
            kubernetes: { kubeconfig: paths.kubeletKubeconfig },
          },
          PORTMAP,
        ]),
      ];
    case "weave":
      return [
        conflist("weave", [{ name: "weave", type: "weave-net", hairpinMode: true, ...(mtu ? { mtu } : {}) }, PORTMAP]),
        {
          path: join(paths.keelsonEtc, "weave.env"),
          content: renderEnvFile(
            { IPALLOC_RANGE: containersCidr, WEAVE_MTU: mtu },
            "Written by keelson-agent (configure-cni).",
          ),
        },
      ];
    case "noop":
      return [];
    default:
      throw new PhaseError(`networkPlugin "${networkPlugin as string}" is not one of flannel, calico, weave, noop`);
  }
}

/** Our conflists of another plugin (the cluster changed plugin, or a leftover). */
function staleConflists(config: NodeConfig, paths: NodePaths): string[] {
  const wanted = new Set(cniFiles(config, paths).map((f) => f.path));
  try {
    return readdirSync(paths.cniConfDir)
      .filter((f) => KEELSON_CNI.test(f))
      .map((f) => join(paths.cniConfDir, f))
      .filter((p) => !wanted.has(p));
  } catch {
    return [];
  }
}

export const configureCni = definePhase({
  id: "configure-cni",
  async start(ctx) {
    const files = cniFiles(ctx.config, ctx.paths);
    writeFiles(files);
    for (const stale of staleConflists(ctx.config, ctx.paths)) rmSync(stale, { force: true });
    if (files.length === 0) return { message: "networkPlugin noop: no CNI configuration written" };
    return { message: `${ctx.config.cluster.networkPlugin} for ${ctx.config.cluster.containersCidr}` };
  },
  async stop(ctx) {
    if (ctx.intent === "detach") {
      for (const file of cniFiles(ctx.config, ctx.paths)) rmSync(file.path, { force: true });
    }
    return undefined;
  },
  async status(ctx) {
    const files = cniFiles(ctx.config, ctx.paths);
    expectFiles(files);
    const stale = staleConflists(ctx.config, ctx.paths);
    if (stale.length > 0) throw new PhaseError(`CNI configuration of another plugin present: ${stale.join(", ")}`);
    if (files.length === 0) return { message: "networkPlugin noop: no CNI configuration written" };
    return undefined;
  },
});
