import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { NodePackageRef } from "@keelson/protocol";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { packNode } from "../../../../scripts/pack-node.ts";
import { writeNodePackageSource } from "../../../../test/fixtures/node-package-source.ts";
import { NodeController } from "../../src/node/controller.ts";
import { DESIRED_STATE_FILE, loadDesiredState } from "../../src/node/desired-state.ts";
import { NodePackageError, NodePackages } from "../../src/node/node-packages.ts";
import {
  FakeLink,
  fakeNodeControllerOptions,
  joinPayload,
  noServices,
  type PhaseCall,
  tempDir,
  testLog,
  waitFor,
} from "./helpers.ts";

/**
 * Node packages per role version (issue 5): built by the real packer (scripts/pack-node.ts),
 * served over real HTTP, installed by the agent after checking sha256 and manifest, and used by
 * the node's phases after node.join / node.upgrade.
 */

let root: string;
let server: Server;
let base: string;
const served = new Map<string, string>();

function pack(roleVersion: string, kubernetesVersion: string): NodePackageRef {
  const out = join(root, "out", roleVersion);
  const from = writeNodePackageSource(join(root, "src", roleVersion), kubernetesVersion);
  const result = packNode({ from, roleVersion, out });
  const path = `/v1/nodePackages/${roleVersion}/package.tar.gz`;
  served.set(path, result.file);
  return { roleVersion, url: path, sha256: result.sha256 };
}

beforeAll(async () => {
  root = tempDir("node-packages");
  server = createServer((req, res) => {
    const file = served.get(req.url ?? "");
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/gzip" }).end(readFileSync(file));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(root, { recursive: true, force: true });
});

function store(stateDir: string, hostPackage = join(root, "host-package")): NodePackages {
  return new NodePackages({ stateDir, controlPlane: () => base, hostPackage, log: testLog() });
}

describe("NodePackages", () => {
  it("installs a package from a URL relative to the control plane, once, and runs nothing else for it", async () => {
    const ref = pack("1.30.8-kls.1", "v1.30.8-test");
    const stateDir = tempDir("np-state");
    const dir = await store(stateDir).ensure(ref);
    expect(dir.startsWith(join(stateDir, "node-packages", "1.30.8-kls.1-"))).toBe(true);
    expect(readFileSync(join(dir, "bin", "kubelet"), "utf8")).toContain("v1.30.8-test");
    expect(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")).roleVersion).toBe("1.30.8-kls.1");
    // Installed means installed: a second store finds it without the server having it.
    served.delete(ref.url);
    expect(await store(stateDir).ensure(ref)).toBe(dir);
    expect(readdirSync(join(stateDir, "node-packages")).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("without a package, the host's own (KEELSON_NODE_PACKAGE)", async () => {
    expect(await store(tempDir("np-state"), "/opt/keelson/node").ensure(undefined)).toBe("/opt/keelson/node");
  });

  it("refuses bytes that are not what the control plane said, and installs nothing", async () => {
    const ref = pack("1.30.6-kls.1", "v1.30.6-test");
    const stateDir = tempDir("np-state");
    const bad = { ...ref, sha256: "0".repeat(64) };
    await expect(store(stateDir).ensure(bad)).rejects.toThrow(NodePackageError);
    await expect(store(stateDir).ensure(bad)).rejects.toThrow(/has sha256 [0-9a-f]{64}, not 0{64}/);
    expect(readdirSync(join(stateDir, "node-packages"))).toEqual([]);
  });

  it("refuses a package built for another role version than asked", async () => {
    const ref = pack("1.31.4-kls.1", "v1.31.4-test");
    const stateDir = tempDir("np-state");
    await expect(store(stateDir).ensure({ ...ref, roleVersion: "1.31.2-kls.1" })).rejects.toThrow(
      /is for role version 1.31.4-kls.1, but 1.31.2-kls.1 was requested/,
    );
    expect(readdirSync(join(stateDir, "node-packages"))).toEqual([]);
  });

  it("a missing package names its URL", async () => {
    const ref: NodePackageRef = {
      roleVersion: "1.29.10-kls.1",
      url: "/v1/nodePackages/nope/package.tar.gz",
      sha256: "a".repeat(64),
    };
    await expect(store(tempDir("np-state")).ensure(ref)).rejects.toThrow(
      /nodePackages\/nope\/package.tar.gz answered HTTP 404/,
    );
  });

  it("prune keeps the packages named, removes the others", async () => {
    const a = pack("1.30.0-kls.1", "v1.30.0-test");
    const b = pack("1.30.1-kls.1", "v1.30.1-test");
    const stateDir = tempDir("np-state");
    const packages = store(stateDir);
    const dirA = await packages.ensure(a);
    const dirB = await packages.ensure(b);
    packages.prune([b]);
    expect(existsSync(dirA)).toBe(false);
    expect(existsSync(dirB)).toBe(true);
    packages.prune([]);
    expect(existsSync(dirB)).toBe(false);
  });

  it("works with an absolute file URL too (packages on a mounted share)", async () => {
    const ref = pack("1.29.8-kls.1", "v1.29.8-test");
    const file = served.get(ref.url) as string;
    const dir = await store(tempDir("np-state")).ensure({ ...ref, url: pathToFileURL(file).href });
    expect(existsSync(join(dir, "bin", "kubelet"))).toBe(true);
  });
});

describe("node.join / node.upgrade with node packages", () => {
  const controllers: NodeController[] = [];
  afterEach(async () => {
    await Promise.all(controllers.splice(0).map((c) => c.close()));
  });

  /** A host's directories, and controllers on them served by the test's control plane. */
  function packagedHost(name: string) {
    const root = tempDir(name);
    const stateDir = join(root, "state");
    const hostRoot = join(root, "host");
    mkdirSync(stateDir, { recursive: true });
    mkdirSync(hostRoot, { recursive: true });
    const controller = (link: FakeLink, calls: PhaseCall[]) => {
      const c = new NodeController(
        fakeNodeControllerOptions(
          { root, stateDir, hostRoot, link, calls, services: noServices() },
          { controlPlane: () => base },
        ),
      );
      controllers.push(c);
      return c;
    };
    return { stateDir, controller };
  }

  it("the phases run the joined version's package, then the upgraded one's; a package that cannot be had leaves the node as it was", async () => {
    const from = pack("1.30.6-kls.2", "v1.30.6-join");
    const to = pack("1.30.8-kls.2", "v1.30.8-upgrade");
    const { stateDir, controller } = packagedHost("np-node");
    const link = new FakeLink();
    const calls: PhaseCall[] = [];
    const node = controller(link, calls);
    const ok = () => link.last()?.report.status === "ok" && link.last()?.clusterId === "cluster-1";

    await node.join(joinPayload({ kubeRoleVersion: from.roleVersion, nodePackage: from }));
    await waitFor("ok", ok);
    const joinedDir = calls.find((c) => c.action === "start")?.nodePackage as string;
    expect(readFileSync(join(joinedDir, "bin", "kubelet"), "utf8")).toContain("v1.30.6-join");

    // A package the agent cannot get: the upgrade fails before any phase stops.
    calls.length = 0;
    const missing = { ...to, url: "/v1/nodePackages/missing/package.tar.gz" };
    await expect(
      node.upgrade({ clusterId: "cluster-1", kubeRoleVersion: to.roleVersion, settings: {}, nodePackage: missing }),
    ).rejects.toThrow(/HTTP 404/);
    expect(calls.filter((c) => c.action === "stop")).toEqual([]);
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.join.kubeRoleVersion).toBe(from.roleVersion);

    calls.length = 0;
    await node.upgrade({ clusterId: "cluster-1", kubeRoleVersion: to.roleVersion, settings: {}, nodePackage: to });
    await waitFor("ok after the upgrade", ok);
    const stops = calls.filter((c) => c.action === "stop");
    const starts = calls.filter((c) => c.action === "start");
    // The old binaries stop the node, the new ones start it.
    expect(new Set(stops.map((c) => c.nodePackage))).toEqual(new Set([joinedDir]));
    const upgradedDir = starts[0]?.nodePackage as string;
    expect(new Set(starts.map((c) => c.nodePackage))).toEqual(new Set([upgradedDir]));
    expect(readFileSync(join(upgradedDir, "bin", "kubelet"), "utf8")).toContain("v1.30.8-upgrade");
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.join.nodePackage).toEqual(to);
    // The package before stays for a look back.
    expect(existsSync(joinedDir)).toBe(true);
  });

  it("an agent restart with its package gone from the state dir fetches it again; until it can, resume fails", async () => {
    const ref = pack("1.31.2-kls.2", "v1.31.2-resume");
    const { stateDir, controller: make } = packagedHost("np-resume");
    const first = new FakeLink();
    const node = make(first, []);
    await node.join(joinPayload({ kubeRoleVersion: ref.roleVersion, nodePackage: ref }));
    await waitFor("ok", () => first.last()?.report.status === "ok");
    await node.close();

    // The state dir lost its packages and the control plane cannot serve it right now.
    rmSync(join(stateDir, "node-packages"), { recursive: true, force: true });
    const file = served.get(ref.url) as string;
    served.delete(ref.url);
    const calls: PhaseCall[] = [];
    const link = new FakeLink();
    const again = make(link, calls);
    await expect(again.resume()).rejects.toThrow(/HTTP 404/);
    expect(calls).toEqual([]);

    served.set(ref.url, file);
    await again.resume();
    await waitFor("ok after the resume", () => link.last()?.report.status === "ok");
    const dir = calls.find((c) => c.action === "start" || c.action === "status")?.nodePackage as string;
    expect(readFileSync(join(dir, "bin", "kubelet"), "utf8")).toContain("v1.31.2-resume");
  });

  it("node.prefetch installs the upgrade's package while the node runs on; the upgrade then needs no download", async () => {
    const from = pack("1.29.10-kls.3", "v1.29.10-prefetch");
    const to = pack("1.29.12-kls.3", "v1.29.12-prefetch");
    const { stateDir, controller } = packagedHost("np-prefetch");
    const link = new FakeLink();
    const calls: PhaseCall[] = [];
    const node = controller(link, calls);
    await node.join(joinPayload({ kubeRoleVersion: from.roleVersion, nodePackage: from }));
    await waitFor("ok", () => link.last()?.report.status === "ok");
    await expect(node.prefetch({ clusterId: "cluster-2", nodePackage: to })).rejects.toThrow(/not of cluster-2/);

    calls.length = 0;
    expect(await node.prefetch({ clusterId: "cluster-1", nodePackage: to })).toEqual({ ready: true });
    expect(calls.filter((c) => c.action !== "status")).toEqual([]);
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.join.kubeRoleVersion).toBe(from.roleVersion);

    // The control plane no longer serves it: the upgrade uses what the prefetch installed.
    served.delete(to.url);
    await node.upgrade({ clusterId: "cluster-1", kubeRoleVersion: to.roleVersion, settings: {}, nodePackage: to });
    await waitFor("ok after the upgrade", () => link.last()?.report.status === "ok");
    const started = calls.find((c) => c.action === "start")?.nodePackage as string;
    expect(readFileSync(join(started, "bin", "kubelet"), "utf8")).toContain("v1.29.12-prefetch");
  });
});
