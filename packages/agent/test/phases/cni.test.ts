import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cniFiles } from "../../src/phases/impl/network.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { fakeHost, nodeConfig, tempDir } from "./helpers.ts";

/**
 * The conflist the configure-cni phase writes, run through Debian's real CNI plugins
 * (containernetworking-plugins, /usr/lib/cni) the way containerd's CRI plugin runs it for a pod:
 * ADD through the chain in order (each plugin gets the previous one's result), DEL in reverse.
 * Two network namespaces this test creates and removes: "host" (where the bridge and the
 * portmap rules land, so the machine's own namespace is untouched) and "pod".
 *
 * flannel's own plugin binary and daemon come with the network add-on, which Keelson does not
 * install: the flannel entry is turned into the bridge/host-local delegate exactly as flannel's
 * plugin does (flannel-io/cni-plugin, flannel_linux.go: type bridge, isGateway, ipMasq from
 * FLANNEL_IPMASQ, mtu from FLANNEL_MTU unless the delegate sets it, host-local IPAM on
 * FLANNEL_SUBNET with a route to FLANNEL_NETWORK) and that delegate runs with the real plugins.
 */

const IP = "/usr/sbin/ip";
const CNI_PATH = "/usr/lib/cni";

function missingPrerequisite(): string | undefined {
  if (process.getuid?.() !== 0) return "network namespaces need root";
  for (const bin of [
    IP,
    join(CNI_PATH, "bridge"),
    join(CNI_PATH, "host-local"),
    join(CNI_PATH, "portmap"),
    "/bin/busybox",
  ]) {
    try {
      accessSync(bin, constants.X_OK);
    } catch {
      return `${bin} is not installed (scripts/ensure-system-deps.sh)`;
    }
  }
  return undefined;
}

function inNs(ns: string, argv: string[]): string {
  return execFileSync(IP, ["netns", "exec", ns, ...argv], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

type PluginConf = Record<string, unknown> & { type: string };

/** One CNI plugin call inside the host namespace; returns its parsed result (or throws its error). */
function callPlugin(
  hostNs: string,
  podNs: string,
  command: "ADD" | "DEL",
  conf: PluginConf,
): Record<string, unknown> | undefined {
  const run = spawnSync(IP, ["netns", "exec", hostNs, join(CNI_PATH, conf.type)], {
    input: JSON.stringify(conf),
    encoding: "utf8",
    env: {
      PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: "keelson-cni-test",
      CNI_NETNS: `/var/run/netns/${podNs}`,
      CNI_IFNAME: "eth0",
      CNI_PATH,
    },
  });
  if (run.status !== 0) throw new Error(`${conf.type} ${command} failed: ${run.stdout}${run.stderr}`);
  return run.stdout.trim() ? (JSON.parse(run.stdout) as Record<string, unknown>) : undefined;
}

/** "10.248.7.1/24" -> "10.248.7.0/24", as Go's net.ParseCIDR hands flannel its subnet. */
function networkOf(cidr: string): string {
  const [address, bits] = cidr.split("/");
  const n = address!.split(".").reduce((acc, octet) => acc * 256 + Number(octet), 0);
  const size = 2 ** (32 - Number(bits));
  const net = n - (n % size);
  return `${[24, 16, 8, 0].map((shift) => Math.floor(net / 2 ** shift) % 256).join(".")}/${bits}`;
}

/** flannel's plugin, reduced to what it hands its delegate (see the file comment). */
function flannelDelegate(plugin: PluginConf, env: Record<string, string>, dataDir: string): PluginConf {
  const delegate = { ...(plugin.delegate as Record<string, unknown>) };
  return {
    type: "bridge",
    ipMasq: env.FLANNEL_IPMASQ !== "true",
    mtu: Number(env.FLANNEL_MTU),
    isGateway: true,
    ...delegate,
    // dataDir keeps this test's leases out of the machine's /var/lib/cni (flannel leaves the default).
    ipam: {
      type: "host-local",
      subnet: networkOf(env.FLANNEL_SUBNET!),
      routes: [{ dst: env.FLANNEL_NETWORK }],
      dataDir,
    },
  } as PluginConf;
}

describe("CNI configuration with the real plugins", () => {
  beforeAll(() => {
    const missing = missingPrerequisite();
    if (missing) throw new Error(`cannot run the CNI test: ${missing}`);
  });
  const tag = randomBytes(3).toString("hex");
  const hostNs = `kcni-${tag}-host`;
  const podNs = `kcni-${tag}-pod`;
  const root = tempDir("cni");

  afterAll(() => {
    for (const ns of [podNs, hostNs]) spawnSync(IP, ["netns", "delete", ns]);
    rmSync(root, { recursive: true, force: true });
  });

  it("runs flannel's conflist (as its bridge/host-local delegate) and portmap: ADD wires the pod, DEL undoes it", () => {
    const config = nodeConfig({
      hostRoot: join(root, "host"),
      primaryIp: "127.0.0.13",
      host: fakeHost(root),
      cluster: { networkPlugin: "flannel", containersCidr: "10.248.0.0/16", mtuSize: "1400" },
    });
    const [conflistFile] = cniFiles(config, nodePaths(config.hostRoot));
    const conflist = JSON.parse(conflistFile!.content) as { cniVersion: string; name: string; plugins: PluginConf[] };
    expect(conflist.plugins.map((p) => p.type)).toEqual(["flannel", "portmap"]);
    // What flanneld writes to /run/flannel/subnet.env for this node's lease of containersCidr.
    const subnetEnv = {
      FLANNEL_NETWORK: "10.248.0.0/16",
      FLANNEL_SUBNET: "10.248.7.1/24",
      FLANNEL_MTU: "1450",
      FLANNEL_IPMASQ: "true",
    };
    const chain = conflist.plugins.map((p) =>
      p.type === "flannel" ? flannelDelegate(p, subnetEnv, join(root, "leases")) : p,
    );

    for (const ns of [hostNs, podNs]) execFileSync(IP, ["netns", "add", ns]);
    inNs(hostNs, [IP, "link", "set", "lo", "up"]);
    // containerd's CRI runs loopback for every pod before the network's conflist.
    callPlugin(hostNs, podNs, "ADD", { cniVersion: conflist.cniVersion, name: "cni-loopback", type: "loopback" });

    let prevResult: Record<string, unknown> | undefined;
    for (const plugin of chain) {
      prevResult = callPlugin(hostNs, podNs, "ADD", {
        cniVersion: conflist.cniVersion,
        name: conflist.name,
        ...plugin,
        ...(plugin.type === "portmap"
          ? { runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }] } }
          : {}),
        ...(prevResult ? { prevResult } : {}),
      });
    }
    const ips = (prevResult?.ips ?? []) as { address: string; gateway?: string }[];
    expect(ips).toHaveLength(1);
    const podIp = ips[0]!.address.split("/")[0]!;
    expect(podIp).toMatch(/^10\.248\.7\.\d+$/);
    expect(ips[0]!.gateway).toBe("10.248.7.1");

    // The pod has eth0 with its address and the delegate's MTU (the conflist's mtuSize), lo up,
    // and the route to the whole cluster network; the host reaches it over the bridge.
    const eth0 = inNs(podNs, [IP, "-4", "-o", "addr", "show", "eth0"]);
    expect(eth0).toContain(`inet ${podIp}/24`);
    expect(inNs(podNs, [IP, "-o", "link", "show", "eth0"])).toContain("mtu 1400");
    expect(inNs(podNs, [IP, "-o", "link", "show", "lo"])).toMatch(/state UNKNOWN|LOOPBACK,UP/);
    expect(inNs(podNs, [IP, "route", "show"])).toContain("10.248.0.0/16 via 10.248.7.1");
    expect(inNs(hostNs, ["/bin/busybox", "ping", "-c", "1", "-W", "2", podIp])).toContain("1 packets received");
    // portmap's DNAT for the mapped port, in the host namespace.
    expect(inNs(hostNs, ["iptables-save", "-t", "nat"])).toMatch(
      new RegExp(`--dport 18080 .*--to-destination ${podIp}:80`),
    );

    for (const plugin of [...chain].reverse()) {
      callPlugin(hostNs, podNs, "DEL", {
        cniVersion: conflist.cniVersion,
        name: conflist.name,
        ...plugin,
        ...(plugin.type === "portmap"
          ? { runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }] } }
          : {}),
      });
    }
    expect(spawnSync(IP, ["netns", "exec", podNs, IP, "link", "show", "eth0"]).status).not.toBe(0);
    expect(inNs(hostNs, ["iptables-save", "-t", "nat"])).not.toContain("18080");
  });
});
