import type { HelloFrame, HostFacts } from "../src/index.ts";
import { PROTOCOL_VERSION } from "../src/index.ts";

export function sampleFacts(overrides: Partial<HostFacts> = {}): HostFacts {
  return {
    hostname: "node-1",
    os: { platform: "linux", family: "debian", distro: "Ubuntu", release: "22.04", codename: "jammy", kernel: "6.5.0" },
    arch: "x64",
    cpu: { model: "Test CPU", count: 4 },
    memory: { totalBytes: 8 * 1024 ** 3 },
    disks: [{ name: "/dev/sda", type: "SSD", sizeBytes: 100 * 1024 ** 3 }],
    interfaces: [{ name: "eth0", mac: "02:00:00:00:00:01", addresses: ["10.0.0.5", "fe80::1"] }],
    primaryIp: "10.0.0.5",
    agentVersion: "0.1.0",
    ...overrides,
  };
}

export function sampleHello(overrides: Partial<HelloFrame> = {}): HelloFrame {
  return {
    type: "hello",
    protocolVersion: PROTOCOL_VERSION,
    hostId: "host-1",
    agentVersion: "0.1.0",
    hostname: "node-1",
    primaryIp: "10.0.0.5",
    facts: sampleFacts(),
    agentStatus: "running",
    ...overrides,
  };
}
