import { describe, expect, it } from "vitest";
import { EXIT } from "../src/errors.ts";
import { parseHostsConfig } from "../src/hosts-config.ts";

/** The hosts' config of configure-hosts and upgrade-hosts: its optional controlPlaneHosts (issue 11). */
describe("the hosts' config", () => {
  const file = "/work/cfg/hosts.yaml";
  const base = { hostAgentRepo: "./agent.tar.gz", hosts: ["worker-1"] };
  const parse = (extra: Record<string, unknown>) => parseHostsConfig(file, { ...base, ...extra });

  it("takes controlPlaneHosts as {name, ip} entries; without it the pins are left alone", () => {
    expect(parse({}).controlPlaneHosts).toBeUndefined();
    expect(parse({ controlPlaneHosts: [] }).controlPlaneHosts).toEqual([]);
    expect(
      parse({
        controlPlaneHosts: [
          { name: "cp.keelson.test", ip: "10.0.1.20" },
          { name: "cp-2.keelson.test", ip: "fd00::20" },
        ],
      }).controlPlaneHosts,
    ).toEqual([
      { name: "cp.keelson.test", ip: "10.0.1.20" },
      { name: "cp-2.keelson.test", ip: "fd00::20" },
    ]);
  });

  it("refuses bad entries naming the field, as a usage error", () => {
    const cases: [unknown, string][] = [
      ["cp.keelson.test=10.0.1.20", "controlPlaneHosts must list {name, ip} entries"],
      [["cp.keelson.test"], "controlPlaneHosts[0] must be {name, ip}"],
      [
        [{ name: "cp.keelson.test", ip: "10.0.1.300" }],
        'controlPlaneHosts[0].ip "10.0.1.300" must be an IPv4 or IPv6 address',
      ],
      [
        [{ name: "10.0.1.1", ip: "10.0.1.20" }],
        'controlPlaneHosts[0].name "10.0.1.1" must be a host name (not an address)',
      ],
      [
        [
          { name: "cp.keelson.test", ip: "10.0.1.20" },
          { name: "cp.keelson.test", ip: "10.0.1.21" },
        ],
        "controlPlaneHosts[1].name cp.keelson.test is named twice",
      ],
      [[{ name: "cp.keelson.test", ip: "10.0.1.20", port: 8443 }], "controlPlaneHosts[0].port is not a field"],
      [
        Array.from({ length: 17 }, (_, i) => ({ name: `cp-${i}.keelson.test`, ip: "10.0.1.20" })),
        "controlPlaneHosts must have at most 16 entries, not 17",
      ],
    ];
    for (const [value, message] of cases) {
      let error: unknown;
      try {
        parse({ controlPlaneHosts: value });
      } catch (e) {
        error = e;
      }
      expect((error as Error)?.message, JSON.stringify(value)).toContain(`${file}: ${message}`);
      expect((error as { exitCode?: number }).exitCode).toBe(EXIT.usage);
    }
  });
});
