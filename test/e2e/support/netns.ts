import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";

/**
 * Test hosts in network namespaces: a switch namespace holding a bridge, one namespace per
 * host with a veth into the bridge, and one veth from the root namespace into the bridge so
 * processes there (the control plane, the test) reach the hosts. Everything is created by the
 * test on a 10.99.<n>.0/24 subnet nobody on this machine uses, named with a random tag, and
 * removed by `destroy()` (also registered for process exit, so a crashed run cleans up too).
 */

export interface NetnsHost {
  name: string;
  netns: string;
  ip: string;
}

export interface TestNetwork {
  tag: string;
  subnet: string;
  /** The root namespace's address on the test subnet (where the control plane listens). */
  gatewayIp: string;
  hosts: NetnsHost[];
  /**
   * `ip netns exec <netns> ...argv`, for spawning a process inside a host, with this machine's
   * cgroup hierarchies mounted again (see hostCgroupMounts).
   */
  exec(host: NetnsHost, argv: string[]): string[];
  destroy(): void;
}

function ip(args: string[]): string {
  return execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** Why network namespaces cannot be used here, or undefined when they can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "creating network namespaces needs root";
  try {
    ip(["-V"]);
  } catch {
    return "the ip command (iproute2) is not installed";
  }
  return undefined;
}

function freeSubnetOctet(): number {
  const used = ip(["-4", "-o", "addr", "show"]);
  for (let attempt = 0; attempt < 50; attempt++) {
    const n = 100 + Math.floor(Math.random() * 150);
    if (!used.includes(` 10.99.${n}.`)) return n;
  }
  throw new Error("no free 10.99.x.0/24 subnet found");
}

export function createTestNetwork(hostNames: string[]): TestNetwork {
  const tag = randomBytes(3).toString("hex");
  const octet = freeSubnetOctet();
  const subnet = `10.99.${octet}.0/24`;
  const gatewayIp = `10.99.${octet}.1`;
  const switchNs = `keelson-${tag}-sw`;
  const rootLink = `kt${tag}`;
  const hosts: NetnsHost[] = hostNames.map((name, i) => ({
    name,
    netns: `keelson-${tag}-h${i + 1}`,
    ip: `10.99.${octet}.${11 + i}`,
  }));
  let destroyed = false;
  const destroy = () => {
    if (destroyed) return;
    destroyed = true;
    process.off("exit", destroy);
    // Deleting a namespace deletes its veth ends, which takes the peers along.
    for (const ns of [...hosts.map((h) => h.netns), switchNs]) {
      try {
        ip(["netns", "del", ns]);
      } catch {
        // never created, or already gone
      }
    }
    try {
      ip(["link", "del", rootLink]);
    } catch {
      // gone with the switch namespace
    }
  };
  process.on("exit", destroy);
  try {
    ip(["netns", "add", switchNs]);
    ip(["-n", switchNs, "link", "set", "lo", "up"]);
    ip(["-n", switchNs, "link", "add", "br0", "type", "bridge"]);
    ip(["-n", switchNs, "link", "set", "br0", "up"]);
    ip(["link", "add", rootLink, "type", "veth", "peer", "name", "root", "netns", switchNs]);
    ip(["-n", switchNs, "link", "set", "root", "master", "br0", "up"]);
    ip(["addr", "add", `${gatewayIp}/24`, "dev", rootLink]);
    ip(["link", "set", rootLink, "up"]);
    hosts.forEach((host, i) => {
      ip(["netns", "add", host.netns]);
      ip(["-n", host.netns, "link", "set", "lo", "up"]);
      ip([
        "link",
        "add",
        "name",
        `h${i + 1}`,
        "netns",
        switchNs,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        host.netns,
      ]);
      ip(["-n", switchNs, "link", "set", `h${i + 1}`, "master", "br0", "up"]);
      ip(["-n", host.netns, "addr", "add", `${host.ip}/24`, "dev", "eth0"]);
      ip(["-n", host.netns, "link", "set", "eth0", "up"]);
      ip(["-n", host.netns, "route", "add", "default", "via", gatewayIp]);
    });
  } catch (err) {
    destroy();
    throw err;
  }
  return {
    tag,
    subnet,
    gatewayIp,
    hosts,
    exec: (host, argv) => ["netns", "exec", host.netns, "sh", "-c", `${hostCgroupMounts()} exec "$@"`, "sh", ...argv],
    destroy,
  };
}

/**
 * Shell commands that mount this machine's cgroup hierarchies (v1 controllers or the v2 tree,
 * as /proc/self/mountinfo lists them) again under /sys/fs/cgroup. `ip netns exec` mounts a
 * fresh /sys in a private mount namespace, which hides them, and runc then refuses every
 * container ("no cgroup mount found in mountinfo"); a real host has them where they are here.
 */
function hostCgroupMounts(): string {
  const commands: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [left, right] = line.split(" - ");
    const mountPoint = left?.split(" ")[4];
    const [type, , superOptions = ""] = right?.split(" ") ?? [];
    if (!mountPoint?.startsWith("/sys/fs/cgroup")) continue;
    if (type === "tmpfs" && mountPoint === "/sys/fs/cgroup") {
      commands.push("mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup");
    } else if (type === "cgroup2") {
      commands.push(`mkdir -p ${mountPoint} && mount -t cgroup2 cgroup2 ${mountPoint}`);
    } else if (type === "cgroup") {
      const options = superOptions.split(",").filter((o) => o !== "rw" && o !== "ro");
      const named = options.every((o) => o.startsWith("name="));
      commands.push(
        `mkdir -p ${mountPoint} && mount -t cgroup -o ${named ? "none," : ""}${options.join(",")} cgroup ${mountPoint}`,
      );
    }
  }
  return commands.map((c) => `${c};`).join(" ");
}

/** Namespaces left by this module's tests (a run killed with SIGKILL cannot clean up after itself). */
export function leftoverNamespaces(): string[] {
  return ip(["netns", "list"])
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => /^keelson-[0-9a-f]{6}-(sw|h\d+)$/.test(n));
}
