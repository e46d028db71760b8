import { readFileSync } from "node:fs";
import os from "node:os";
import type { HostCondition, HostFacts } from "@keelson/protocol";
import si from "systeminformation";

/**
 * Host facts (protocol HostFacts) from systeminformation and node:os. Collection is split from
 * selection: `FactsSource` gathers raw readings (replaceable in tests), `buildFacts` turns them
 * into the reported facts, including the choice of the primary IP.
 */

export interface RawInterface {
  name: string;
  mac: string;
  internal: boolean;
  addresses: string[];
}

export interface RawReadings {
  hostname: string;
  platform: string;
  /** os-release ID_LIKE (first word) or ID; "" when unknown. */
  family: string;
  distro: string;
  release: string;
  codename: string;
  kernel: string;
  arch: string;
  cpuModel: string;
  cpuCount: number;
  memoryBytes: number;
  disks: { name: string; type: string; sizeBytes: number }[];
  interfaces: RawInterface[];
  /** Interface of the default route, "" when there is none. */
  defaultInterface: string;
}

export type FactsSource = () => Promise<RawReadings>;

export interface FactsOverrides {
  hostname?: string | undefined;
  primaryIp?: string | undefined;
  agentVersion: string;
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/**
 * The address other hosts should reach this one on: the first IPv4 of the default route's
 * interface; without a default route, the first IPv4 of any non-loopback interface; then the
 * same for IPv6 (link-local addresses never: they need a zone to be usable). An explicit
 * override (KEELSON_PRIMARY_IP) always wins, for hosts whose routing says something else.
 */
export function choosePrimaryIp(interfaces: RawInterface[], defaultInterface: string, override?: string): string {
  if (override) return override;
  const external = interfaces.filter((i) => !i.internal);
  const preferred = [
    ...external.filter((i) => i.name === defaultInterface),
    ...external.filter((i) => i.name !== defaultInterface),
  ];
  for (const iface of preferred) {
    const v4 = iface.addresses.find((a) => IPV4.test(a));
    if (v4) return v4;
  }
  for (const iface of preferred) {
    const v6 = iface.addresses.find((a) => a.includes(":") && !a.toLowerCase().startsWith("fe80"));
    if (v6) return v6;
  }
  return "127.0.0.1";
}

// The protocol bounds every string and list (one host must not fill the control plane's
// database, and a frame over a bound is refused); a Kubernetes node can have hundreds of veth
// interfaces, so clip here rather than have the link refuse the hello.
const MAX_INTERFACES = 256;
const MAX_ADDRESSES = 64;
const MAX_DISKS = 256;
const clip = (text: string, max: number) => (text.length > max ? text.slice(0, max) : text);

export function buildFacts(raw: RawReadings, overrides: FactsOverrides): HostFacts {
  const rank = (i: RawInterface) => (i.name === raw.defaultInterface ? 0 : i.addresses.length > 0 ? 1 : 2);
  const interfaces = raw.interfaces
    .filter((i) => !i.internal)
    .sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name))
    .slice(0, MAX_INTERFACES)
    .map((i) => ({
      name: clip(i.name, 64),
      mac: clip(i.mac, 64),
      addresses: [...new Set(i.addresses)].slice(0, MAX_ADDRESSES).map((a) => clip(a, 64)),
    }));
  return {
    hostname: clip(overrides.hostname || raw.hostname, 253),
    os: {
      platform: clip(raw.platform, 32),
      family: clip(raw.family, 64),
      distro: clip(raw.distro, 255),
      release: clip(raw.release, 255),
      ...(raw.codename ? { codename: clip(raw.codename, 255) } : {}),
      kernel: clip(raw.kernel, 255),
    },
    arch: clip(raw.arch, 32),
    cpu: { model: clip(raw.cpuModel, 255), count: raw.cpuCount },
    memory: { totalBytes: raw.memoryBytes },
    disks: [...raw.disks]
      .sort((a, b) => a.name.localeCompare(b.name))
      .slice(0, MAX_DISKS)
      .map((d) => ({ name: clip(d.name, 255), type: clip(d.type, 64), sizeBytes: d.sizeBytes })),
    interfaces,
    primaryIp: clip(choosePrimaryIp(raw.interfaces, raw.defaultInterface, overrides.primaryIp), 64),
    agentVersion: clip(overrides.agentVersion, 128),
  };
}

/**
 * JSON with object keys sorted, so two collections of the same facts compare equal whatever
 * order a library returned them in.
 */
export function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)));
    }
    return v;
  });
}

/** Reads the host through systeminformation; each reading degrades to "" rather than failing. */
export const systemFactsSource: FactsSource = async () => {
  const [osInfo, defaultInterface, netIfaces, blockDevices] = await Promise.all([
    si.osInfo().catch(() => undefined),
    si.networkInterfaceDefault().catch(() => ""),
    si.networkInterfaces().catch(() => []),
    si.blockDevices().catch(() => []),
  ]);
  const nodeIfaces = os.networkInterfaces();
  const siList = Array.isArray(netIfaces) ? netIfaces : [netIfaces];
  const names = new Set([...siList.map((n) => n.iface), ...Object.keys(nodeIfaces)]);
  const interfaces: RawInterface[] = [...names].map((name) => {
    const fromSi = siList.find((n) => n.iface === name);
    const fromNode = nodeIfaces[name] ?? [];
    // node:os lists every address of an interface; systeminformation only the first of each family.
    const addresses = fromNode.length
      ? fromNode.map((a) => a.address)
      : [fromSi?.ip4, fromSi?.ip6].filter((a): a is string => !!a);
    return {
      name,
      mac: fromNode[0]?.mac ?? fromSi?.mac ?? "",
      internal: fromNode[0]?.internal ?? fromSi?.internal ?? false,
      addresses,
    };
  });
  const cpus = os.cpus();
  return {
    hostname: os.hostname(),
    platform: process.platform,
    family: osFamily(),
    distro: osInfo?.distro ?? "",
    release: osInfo?.release ?? "",
    codename: osInfo?.codename ?? "",
    kernel: osInfo?.kernel ?? os.release(),
    arch: process.arch,
    cpuModel: cpus[0]?.model?.trim() ?? "",
    cpuCount: cpus.length,
    memoryBytes: os.totalmem(),
    disks: blockDevices
      .filter((d) => d.type === "disk" && d.size > 0)
      .map((d) => ({ name: d.device || `/dev/${d.name}`, type: d.physical ?? "", sizeBytes: d.size })),
    interfaces,
    defaultInterface: typeof defaultInterface === "string" ? defaultInterface : "",
  };
};

function osFamily(): string {
  try {
    const text = readFileSync("/etc/os-release", "utf8");
    const field = (name: string) => new RegExp(`^${name}="?([^"\\n]*)"?$`, "m").exec(text)?.[1]?.trim() ?? "";
    return field("ID_LIKE").split(/\s+/)[0] || field("ID");
  } catch {
    return "";
  }
}

/**
 * Collects facts now and then again every `intervalMs`, calling `onChange` only when the
 * stable JSON of the facts differs from the last ones reported.
 */
export class FactsMonitor {
  private last: HostFacts | undefined;
  private lastJson = "";
  private timer: NodeJS.Timeout | undefined;
  private collecting: Promise<HostFacts> | undefined;

  /** The host's conditions (state dir full), looked at on each collection; see state-space.ts. */
  conditions: (() => HostCondition[]) | undefined;

  constructor(
    private readonly overrides: FactsOverrides,
    private readonly source: FactsSource = systemFactsSource,
  ) {}

  /** The last collected facts; collect() must have run once. */
  get current(): HostFacts {
    if (!this.last) throw new Error("facts have not been collected yet");
    return this.last;
  }

  /** Collects once; returns the facts and whether they differ from the previous collection. */
  async collect(): Promise<{ facts: HostFacts; changed: boolean }> {
    // Overlapping ticks (a slow lsblk) share one collection instead of piling up.
    this.collecting ??= this.source().then((raw) => {
      const facts = buildFacts(raw, this.overrides);
      const conditions = this.conditions?.() ?? [];
      return conditions.length > 0 ? { ...facts, conditions } : facts;
    });
    try {
      const facts = await this.collecting;
      const json = stableJson(facts);
      const changed = json !== this.lastJson;
      this.last = facts;
      this.lastJson = json;
      return { facts, changed };
    } finally {
      this.collecting = undefined;
    }
  }

  start(intervalMs: number, onChange: (facts: HostFacts) => void, onError: (err: unknown) => void): void {
    this.stop();
    this.timer = setInterval(() => {
      this.collect().then(
        ({ facts, changed }) => changed && onChange(facts),
        (err: unknown) => onError(err),
      );
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
