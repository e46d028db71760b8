import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeController, NodeMembershipError } from "../../src/node/controller.ts";
import { DESIRED_STATE_FILE, loadDesiredState } from "../../src/node/desired-state.ts";
import type { NodeConfig } from "../../src/phases/config.ts";
import { FakeLink, fakePhases, joinPayload, noServices, tempDir, testLog } from "../node/helpers.ts";

/**
 * `node.settings` through the node controller: the new settings become the desired state
 * (persisted), and the backups hear the node's config on join, on new settings and on leave.
 */

let root: string;
let stateDir: string;
const applied: (NodeConfig | undefined)[] = [];
let node: NodeController;

beforeEach(() => {
  root = tempDir("nodeset");
  stateDir = join(root, "state");
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(join(root, "host"), { recursive: true });
  applied.length = 0;
  node = new NodeController({
    stateDir,
    nodePackage: join(root, "node-package"),
    hostRoot: join(root, "host"),
    host: () => ({ hostId: "host-1", hostname: "master-1", primaryIp: "10.0.0.7" }),
    link: new FakeLink(),
    services: async () => noServices(),
    log: testLog(),
    phases: fakePhases(join(root, "host"), []),
    reportIntervalMs: 20,
    backups: { apply: (config) => applied.push(config) },
  });
});

afterEach(async () => {
  await node.close();
  rmSync(root, { recursive: true, force: true });
});

describe("node.settings", () => {
  it("keeps the new settings as the desired state and hands the config to the backups", async () => {
    await node.join(joinPayload({ role: "master" }));
    expect(applied.at(-1)?.cluster).not.toHaveProperty("isEtcdBackupEnabled");
    const settings = {
      ...joinPayload().settings,
      isEtcdBackupEnabled: true,
      intervalInMins: 5,
      maxIntervalBackupCount: 2,
    };
    expect(await node.settings({ clusterId: "cluster-1", settings })).toEqual({ applied: true });
    expect(applied.at(-1)).toMatchObject({ role: "master", clusterId: "cluster-1", cluster: { intervalInMins: 5 } });
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.join.settings).toEqual(settings);
  });

  it("refuses settings of a cluster the host is not in, and the backups stop on leave", async () => {
    await expect(node.settings({ clusterId: "cluster-1", settings: {} })).rejects.toBeInstanceOf(NodeMembershipError);
    await node.join(joinPayload({ role: "master" }));
    await expect(node.settings({ clusterId: "cluster-2", settings: {} })).rejects.toBeInstanceOf(NodeMembershipError);
    await node.leave({ clusterId: "cluster-1", lastNode: true });
    expect(applied.length).toBeGreaterThan(1);
    expect(applied.at(-1)).toBeUndefined();
  });
});
