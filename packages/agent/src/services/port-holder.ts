import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { isIPv4, isIPv6 } from "node:net";

/**
 * Who listens on a TCP port, read from the kernel's own tables: the LISTEN sockets of
 * /proc/net/tcp{,6} give the socket inode, the /proc/<pid>/fd links of every process name the
 * inode (`socket:[N]`), and /proc/<pid>/comm the program. Reading other users' fd links needs
 * root (which the agent is on a real host); a holder that cannot be seen is reported as unknown.
 * Only the agent's own network namespace is visible, which is the one its services bind in.
 */

export interface PortListener {
  /** Local address as text: dotted IPv4, "::" style IPv6 (groups not compressed except "::"). */
  address: string;
  port: number;
  inode: string;
}

export interface PortHolder {
  pid: number;
  /** The program name (/proc/<pid>/comm). */
  comm: string;
}

const LISTEN = "0A";

function ipv4FromHex(hex: string): string {
  // One 32-bit word in host (little-endian) byte order.
  const bytes = [6, 4, 2, 0].map((i) => Number.parseInt(hex.slice(i, i + 2), 16));
  return bytes.join(".");
}

function ipv6FromHex(hex: string): string {
  // Four 32-bit words, each in host (little-endian) byte order.
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    for (const i of [6, 4, 2, 0]) bytes.push(Number.parseInt(word.slice(i, i + 2), 16));
  }
  if (bytes.every((b) => b === 0)) return "::";
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 255 && bytes[11] === 255) {
    return `::ffff:${bytes.slice(12).join(".")}`;
  }
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  return groups.join(":");
}

/** Expands an IPv6 address to its eight hex groups (no leading zeros), for comparison. */
function expandIpv6(address: string): string {
  if (address === "::") return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return `::ffff:${mapped[1]}`;
  const [head = "", tail] = address.toLowerCase().split("::");
  const headGroups = head ? head.split(":") : [];
  const tailGroups = tail ? tail.split(":") : [];
  const fill = tail === undefined ? [] : Array(8 - headGroups.length - tailGroups.length).fill("0");
  return [...headGroups, ...fill, ...tailGroups].map((g) => Number.parseInt(g, 16).toString(16)).join(":");
}

/** The TCP sockets listening on `port` (IPv4 and IPv6). */
export function listenersOn(port: number, procRoot = "/proc"): PortListener[] {
  const found: PortListener[] = [];
  for (const [file, toAddress] of [
    ["tcp", ipv4FromHex],
    ["tcp6", ipv6FromHex],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(`${procRoot}/net/${file}`, "utf8");
    } catch {
      continue; // no IPv6 in this kernel
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [local, state, inode] = [fields[1], fields[3], fields[9]];
      if (!local || state !== LISTEN || !inode) continue;
      const [addressHex = "", portHex = ""] = local.split(":");
      if (Number.parseInt(portHex, 16) !== port) continue;
      found.push({ address: toAddress(addressHex), port, inode });
    }
  }
  return found;
}

/** Whether a socket listening on `listenerAddress` keeps a new listener on `host` off the port. */
export function addressesClash(listenerAddress: string, host: string): boolean {
  const wildcard = (a: string) => a === "0.0.0.0" || a === "::" || a === "";
  if (wildcard(listenerAddress) || wildcard(host)) return true;
  if (isIPv4(host)) return listenerAddress === host || listenerAddress === `::ffff:${host}`;
  if (isIPv6(host)) return expandIpv6(listenerAddress) === expandIpv6(host);
  return false;
}

/** The processes that hold any of these socket inodes open (as far as /proc lets us see). */
export function socketHolders(inodes: Set<string>, procRoot = "/proc"): PortHolder[] {
  const holders: PortHolder[] = [];
  let pids: string[];
  try {
    pids = readdirSync(procRoot).filter((name) => /^\d+$/.test(name));
  } catch {
    return holders;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`${procRoot}/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`${procRoot}/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode === undefined || !inodes.has(inode)) continue;
      let comm = "?";
      try {
        comm = readFileSync(`${procRoot}/${pid}/comm`, "utf8").trim();
      } catch {
        // exited meanwhile: keep the pid
      }
      holders.push({ pid: Number(pid), comm });
      break;
    }
  }
  return holders;
}

/** The parent pid of a process (field 4 of /proc/<pid>/stat), undefined when it is gone. */
export function parentPid(pid: number, procRoot = "/proc"): number | undefined {
  try {
    const stat = readFileSync(`${procRoot}/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

/** Whether `pid` is `ancestor` or one of its descendants (a wrapper's child holds the socket). */
export function isWithin(pid: number, ancestor: number, procRoot = "/proc"): boolean {
  let current: number | undefined = pid;
  for (let hops = 0; current !== undefined && current > 1 && hops < 64; hops++) {
    if (current === ancestor) return true;
    current = parentPid(current, procRoot);
  }
  return false;
}
