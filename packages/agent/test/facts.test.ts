import { HostFacts } from "@keelson/protocol";
import { Compile } from "typebox/compile";
import { describe, expect, it } from "vitest";
import {
  buildFacts,
  choosePrimaryIp,
  FactsMonitor,
  type RawInterface,
  type RawReadings,
  stableJson,
  systemFactsSource,
} from "../src/facts.ts";

const factsValidator = Compile(HostFacts);

const iface = (name: string, addresses: string[], internal = false): RawInterface => ({
  name,
  mac: internal ? "00:00:00:00:00:00" : `02:00:00:00:00:${name.length.toString(16).padStart(2, "0")}`,
  internal,
  addresses,
});

function readings(overrides: Partial<RawReadings> = {}): RawReadings {
  return {
    hostname: "real-host",
    platform: "linux",
    family: "debian",
    distro: "Debian GNU/Linux",
    release: "12",
    codename: "bookworm",
    kernel: "6.1.0-18-amd64",
    arch: "x64",
    cpuModel: "Example CPU",
    cpuCount: 4,
    memoryBytes: 8 * 1024 ** 3,
    disks: [{ name: "/dev/vda", type: "SSD", sizeBytes: 100 * 1024 ** 3 }],
    interfaces: [
      iface("lo", ["127.0.0.1", "::1"], true),
      iface("eth0", ["10.0.0.5", "fe80::1"]),
      iface("eth1", ["192.168.1.9"]),
    ],
    defaultInterface: "eth1",
    ...overrides,
  };
}

describe("primary IP", () => {
  it("is the first IPv4 of the default route's interface, not the first interface", () => {
    const list = [iface("eth0", ["10.0.0.5"]), iface("eth1", ["fe80::9", "192.168.1.9", "192.168.1.10"])];
    expect(choosePrimaryIp(list, "eth1")).toBe("192.168.1.9");
    expect(choosePrimaryIp(list, "eth0")).toBe("10.0.0.5");
  });

  it("falls back to any non-loopback IPv4 without a default route", () => {
    const list = [iface("lo", ["127.0.0.1"], true), iface("docker0", []), iface("eth0", ["10.1.2.3"])];
    expect(choosePrimaryIp(list, "")).toBe("10.1.2.3");
    // A default interface without an IPv4 does not win over one that has one.
    expect(choosePrimaryIp(list, "docker0")).toBe("10.1.2.3");
  });

  it("uses a global IPv6 address when there is no IPv4, never a link-local one", () => {
    const list = [iface("lo", ["::1"], true), iface("eth0", ["fe80::1", "2001:db8::5"])];
    expect(choosePrimaryIp(list, "eth0")).toBe("2001:db8::5");
    expect(choosePrimaryIp([iface("eth0", ["fe80::1"])], "eth0")).toBe("127.0.0.1");
  });

  it("is overridden by KEELSON_PRIMARY_IP whatever the routes say", () => {
    expect(choosePrimaryIp([iface("eth0", ["10.0.0.5"])], "eth0", "172.16.0.1")).toBe("172.16.0.1");
  });
});

describe("buildFacts", () => {
  it("reports the protocol's facts: valid, loopback left out, overrides applied", () => {
    const facts = buildFacts(readings(), { hostname: "host-a", primaryIp: undefined, agentVersion: "1.2.3" });
    expect(factsValidator.Check(facts)).toBe(true);
    expect(facts.hostname).toBe("host-a");
    expect(facts.primaryIp).toBe("192.168.1.9");
    expect(facts.agentVersion).toBe("1.2.3");
    expect(facts.interfaces.map((i) => i.name)).toEqual(["eth1", "eth0"]);
    expect(facts.os).toEqual({
      platform: "linux",
      family: "debian",
      distro: "Debian GNU/Linux",
      release: "12",
      codename: "bookworm",
      kernel: "6.1.0-18-amd64",
    });
    expect(facts.cpu).toEqual({ model: "Example CPU", count: 4 });
    expect(facts.memory.totalBytes).toBe(8 * 1024 ** 3);

    const overridden = buildFacts(readings(), { primaryIp: "10.9.9.9", agentVersion: "1.2.3" });
    expect(overridden.hostname).toBe("real-host");
    expect(overridden.primaryIp).toBe("10.9.9.9");
  });

  it("stays inside the protocol's bounds on a host with hundreds of interfaces", () => {
    const many = Array.from({ length: 400 }, (_, i) => iface(`veth${i}`, [`10.${i >> 8}.${i & 255}.1`]));
    const facts = buildFacts(
      readings({
        interfaces: [...many, iface("eth0", ["10.200.0.1"])],
        defaultInterface: "eth0",
        hostname: "h".repeat(300),
      }),
      { agentVersion: "1" },
    );
    expect(facts.interfaces).toHaveLength(256);
    expect(facts.interfaces[0]?.name).toBe("eth0");
    expect(facts.hostname).toHaveLength(253);
    expect(factsValidator.Check(facts)).toBe(true);
  });

  it("reads this machine through systeminformation into valid facts", async () => {
    const facts = buildFacts(await systemFactsSource(), { agentVersion: "0.0.1" });
    expect(factsValidator.Errors(facts)).toEqual([]);
    expect(facts.cpu.count).toBeGreaterThan(0);
    expect(facts.memory.totalBytes).toBeGreaterThan(0);
    expect(facts.primaryIp).not.toBe("");
  });
});

describe("change detection", () => {
  it("compares facts by content, whatever the key order", () => {
    expect(stableJson({ b: 1, a: { d: [1, 2], c: "x" } })).toBe(stableJson({ a: { c: "x", d: [1, 2] }, b: 1 }));
    expect(stableJson({ a: [1, 2] })).not.toBe(stableJson({ a: [2, 1] }));
  });

  it("reports a change only when a fact changed", async () => {
    let current = readings();
    const monitor = new FactsMonitor({ agentVersion: "1" }, async () => structuredClone(current));
    expect((await monitor.collect()).changed).toBe(true);
    expect((await monitor.collect()).changed).toBe(false);
    // Same interfaces reported in another order: no change.
    current = { ...current, interfaces: [...current.interfaces].reverse() };
    expect((await monitor.collect()).changed).toBe(false);
    current = { ...current, interfaces: [...current.interfaces, iface("eth2", ["10.3.3.3"])] };
    const third = await monitor.collect();
    expect(third.changed).toBe(true);
    expect(monitor.current.interfaces.map((i) => i.name)).toContain("eth2");
  });

  it("collects periodically and calls back only on changes", async () => {
    let memory = 1024;
    const monitor = new FactsMonitor({ agentVersion: "1" }, async () => readings({ memoryBytes: memory }));
    await monitor.collect();
    const seen: number[] = [];
    monitor.start(
      20,
      (facts) => seen.push(facts.memory.totalBytes),
      () => {},
    );
    await new Promise((r) => setTimeout(r, 90));
    expect(seen).toEqual([]);
    memory = 2048;
    await new Promise((r) => setTimeout(r, 90));
    monitor.stop();
    expect(seen).toEqual([2048]);
  });
});
