import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { writeOciArchive } from "../../../test/support/oci-image.ts";
import { fakeAgentPackage } from "../../control-plane/test/agent-package-fixtures.ts";
import type { Fleet } from "../../control-plane/test/membership-harness.ts";
import { type FleetAllocator, readyCluster, recordRolls } from "../../control-plane/test/rollout-harness.ts";
import { isLocalCommand } from "../src/commands/release.ts";
import { parseMgmtSpec } from "../src/commands/upgrade-mgmt.ts";
import { useCliFleet } from "./cli-fleet.ts";
import { keelson } from "./run-cli.ts";

/**
 * `keelson advanced-ddu upgrade-mgmt --config <cluster spec>` (spec §4.9, step 2) through the
 * real binary against a control plane with simulated hosts: its argument rules, and what it
 * runs: the management cluster's agents upgraded one at a time, then its nodes restarted with
 * one master down at a time, and a host outside the cluster left alone.
 */
vi.setConfig({ testTimeout: 180_000 });

let f: Fleet;
let pool: FleetAllocator;
let dir: string;
let env: Record<string, string>;

useCliFleet(4, { namePrefix: "mgm", phaseTimeMs: 50 }, (fleet) => {
  ({ f, pool, dir, env } = fleet);
  writeFileSync(join(dir, "keelson-agent-7.2.0.tar.gz"), fakeAgentPackage("7.2.0"));
  writeFileSync(join(dir, "not-a-package.tar.gz"), "plain text");
  writeOciArchive(join(dir, "oci"), join(dir, "images-7.2.0.tar"), "example.com/keelson/node-images:7.2.0");
});

const spec = (name: string, body: string) => {
  const file = join(dir, name);
  writeFileSync(file, body);
  return file;
};

describe("advanced-ddu upgrade-mgmt: argument rules", () => {
  it("goes to the API's program; the other advanced-ddu commands stay local", () => {
    expect(isLocalCommand(["advanced-ddu", "upgrade-mgmt", "--config", "x.yaml"])).toBe(false);
    expect(isLocalCommand(["advanced-ddu", "scale-du", "up"])).toBe(true);
  });

  it("reads name and nodeletPkg (relative to the file) and refuses a spec without them", () => {
    expect(
      parseMgmtSpec("/srv/mgmt/spec.yaml", { name: "mgmt", nodeletPkg: "pkg/a.tar.gz", masterVipIpv4: "x" }),
    ).toEqual({ file: "/srv/mgmt/spec.yaml", cluster: "mgmt", hostAgentRepo: "/srv/mgmt/pkg/a.tar.gz" });
    expect(() => parseMgmtSpec("s.yaml", { nodeletPkg: "a.tar.gz" })).toThrow(
      "s.yaml: name must name the management cluster",
    );
    expect(() => parseMgmtSpec("s.yaml", { name: "m", nodeletPkg: 3 })).toThrow(
      "s.yaml: nodeletPkg must name the node agent package file",
    );
  });

  it("exits 2 without --config, or when nodeletPkg is no agent package; 1 for an unknown cluster; nothing changes", async () => {
    const none = await keelson(["advanced-ddu", "upgrade-mgmt"], { env });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--config <file> is required: the management cluster's spec file");

    const noPkg = spec("no-pkg.yaml", "name: mgm-cluster\n");
    const missing = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", noPkg], { env });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`${noPkg}: nodeletPkg must name the node agent package file`);

    const bad = spec("bad-pkg.yaml", "name: mgm-cluster\nnodeletPkg: not-a-package.tar.gz\n");
    const notPkg = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", bad], { env });
    expect(notPkg.code).toBe(2);
    expect(notPkg.stderr).toContain("is not an agent package (no manifest.json)");

    const other = spec("other.yaml", "name: no-such-cluster\nnodeletPkg: keelson-agent-7.2.0.tar.gz\n");
    const unknown = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", other], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no cluster "no-such-cluster" in this project');
    expect(f.sim.agents.map((a) => a.agentVersion)).not.toContain("7.2.0");
  });
});

describe("advanced-ddu upgrade-mgmt: what it runs", () => {
  it("upgrades the cluster's agents, then restarts its nodes one master at a time; an outside host is left alone", async () => {
    const [m1, m2, w1, outside] = pool.take(4) as [
      (typeof f.sim.agents)[number],
      (typeof f.sim.agents)[number],
      (typeof f.sim.agents)[number],
      (typeof f.sim.agents)[number],
    ];
    await readyCluster(f, "mgm-cluster", [m1, m2], [w1]);
    const oldVersion = outside.agentVersion;
    const rolls = recordRolls(f);
    const file = spec(
      "mgmt.yaml",
      "name: mgm-cluster\nmasterVipIpv4: 10.0.3.10\nmasterVipIface: eth0\nnodeletPkg: keelson-agent-7.2.0.tar.gz\n" +
        "dockerRepo: images-7.2.0.tar\n",
    );

    const res = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", file], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain("agent package 7.2.0 stored on the control plane");
    expect(res.stdout).toMatch(/succeeded: hosts\.upgrade/);
    expect(res.stdout).toMatch(/succeeded: cluster\.restart/);
    expect(res.stdout).toContain(
      "cluster mgm-cluster: every node runs agent 7.2.0 and is ok; its runtimes list example.com/keelson/node-images:7.2.0",
    );
    // The images staged on the members (imported: they run a runtime), not on the outside host.
    for (const a of [m1, m2, w1]) expect(a.images).toContain("example.com/keelson/node-images:7.2.0");
    expect(res.stdout).toContain(
      `${m1.hostname}: images-7.2.0 imported; the runtime lists example.com/keelson/node-images:7.2.0`,
    );
    expect(outside.stagedImages.size).toBe(0);

    // Every member at the new version, restarted once; the host outside the cluster untouched.
    expect([m1, m2, w1].map((a) => a.agentVersion)).toEqual(["7.2.0", "7.2.0", "7.2.0"]);
    expect(outside.agentVersion).toBe(oldVersion);
    const restarted = rolls.filter((r) => r.name === "node.restart").map((r) => r.hostId);
    expect([...restarted].sort()).toEqual([m1, m2, w1].map((a) => a.hostId).sort());
    // The masters first, one at a time: when the second master's restart was sent, no other
    // member of the cluster was down.
    expect(restarted.slice(0, 2).sort()).toEqual([m1.hostId, m2.hostId].sort());
    const second = rolls.find((r) => r.hostId === restarted[1]);
    expect(second?.busy.filter((id) => id !== restarted[1])).toEqual([]);

    // Again: the agents are current, so only the restart runs.
    const again = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", file], { env });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain("agents run 7.2.0 already; a staggered restart of its nodes");
    expect(again.stdout).not.toMatch(/hosts\.upgrade/);
    expect(again.stdout).toMatch(/succeeded: cluster\.restart/);

    // A node whose runtime loses the images during its restart: the command is not done.
    w1.beforeRoll = () => {
      w1.images = [];
    };
    try {
      const lost = await keelson(["advanced-ddu", "upgrade-mgmt", "--config", file], { env });
      expect(lost.code).toBe(1);
      expect(lost.stderr).toContain(
        `upgrade-mgmt is not done:\n  ${w1.hostname}: the runtime does not list example.com/keelson/node-images:7.2.0`,
      );
    } finally {
      w1.beforeRoll = undefined;
    }
  });
});
