import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CommandName } from "@keelson/protocol";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packNode } from "../../../scripts/pack-node.ts";
import { writeNodePackageSource } from "../../../test/fixtures/node-package-source.ts";
import { nodeShelf } from "../src/domain/packages/node-shelf.ts";
import { sha256 } from "./agent-package-fixtures.ts";
import { ADMIN_TOKEN } from "./helpers.ts";
import { type Fleet, startFleet, w, waitFor } from "./membership-harness.ts";
import { FleetAllocator, post, readyCluster } from "./rollout-harness.ts";

/**
 * Node packages per role version (issue 5): stored and served by the control plane like agent
 * packages, handed to nodes with node.join and node.upgrade, and required for an upgrade of a
 * cluster that runs served packages.
 */

const FROM = "1.30.6-kls.1";
const PATCH = "1.30.8-kls.1";
const MINOR = "1.31.4-kls.1";

let f: Fleet;
let pool: FleetAllocator;
const out = mkdtempSync(join(tmpdir(), "keelson-node-pkg-"));
const sent: { hostId: string; name: CommandName; payload: Record<string, unknown> }[] = [];

function build(roleVersion: string, extra: Record<string, string> = {}): Buffer {
  const result = packNode({
    from: writeNodePackageSource(mkdtempSync(join(out, "src-")), `v${roleVersion}-test`, extra),
    roleVersion,
    out: mkdtempSync(join(out, "pkg-")),
  });
  return readFileSync(result.file);
}

const upload = (body: Buffer, token: string | null = ADMIN_TOKEN) =>
  f.t.request({
    method: "POST",
    url: "/v1/nodePackages",
    payload: body,
    headers: { "content-type": "application/octet-stream" },
    token,
  });

beforeAll(async () => {
  f = await startFleet(13, { namePrefix: "npk", phaseTimeMs: 60 });
  pool = new FleetAllocator(f);
  const hub = f.t.app.keelson.agents;
  const inner = hub.sendCommand.bind(hub);
  hub.sendCommand = ((hostId: string, name: CommandName, payload: never, opts?: { timeoutMs?: number }) => {
    sent.push({ hostId, name, payload: structuredClone(payload) as Record<string, unknown> });
    return inner(hostId, name, payload, opts);
  }) as typeof hub.sendCommand;
});
afterAll(async () => {
  await f.close();
  rmSync(out, { recursive: true, force: true });
});

describe("node packages served by the control plane", () => {
  it("refuses a package for a role version outside the catalogue, a broken one, and non-admins; stores nothing", async () => {
    const outside = await upload(build("9.99.0-kls.1"));
    expect(outside.statusCode).toBe(400);
    expect(outside.json()).toMatchObject({
      field: "package",
      message: expect.stringContaining("not in the catalogue"),
    });
    const notGzip = await upload(Buffer.from("not a tarball"));
    expect(notGzip.statusCode).toBe(400);
    expect(notGzip.json()).toMatchObject({
      field: "package",
      message: expect.stringContaining("not a gzipped tarball"),
    });
    expect((await upload(build(FROM), f.t.token)).statusCode).toBe(403);
    const dir = nodeShelf(f.t.app.keelson).dir;
    expect(existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".tar.gz")) : []).toEqual([]);
  });

  it("stores a package of a catalogue role version once, lists it, serves it to anyone with its sha256", async () => {
    const bytes = build(FROM);
    const res = await upload(bytes);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ version: FROM, sha256: sha256(bytes), sizeBytes: bytes.length });
    const list = await f.t.request({ method: "GET", url: "/v1/nodePackages", token: ADMIN_TOKEN });
    expect(list.json()).toEqual([expect.objectContaining({ version: FROM, sha256: sha256(bytes) })]);
    const dl = await f.t.request({ method: "GET", url: `/v1/nodePackages/${FROM}/package.tar.gz`, token: null });
    expect(dl.statusCode).toBe(200);
    expect(sha256(dl.rawPayload)).toBe(sha256(bytes));
    const sum = await f.t.request({
      method: "GET",
      url: `/v1/nodePackages/${FROM}/package.tar.gz.sha256`,
      token: null,
    });
    expect(sum.body).toBe(`${sha256(bytes)}  package.tar.gz\n`);
    expect((await upload(bytes)).statusCode).toBe(200);
    const other = await upload(build(FROM, { "NOTES.txt": "another build" }));
    expect(other.statusCode).toBe(409);
    expect(other.json()).toMatchObject({ code: "package_exists" });
    const missing = await f.t.request({ method: "GET", url: `/v1/nodePackages/${PATCH}/package.tar.gz`, token: null });
    expect(missing.statusCode).toBe(404);
  });

  it("node.join carries the package of the cluster's role version; an upgrade waits for the target's package, then hands it over", async () => {
    const masters = pool.take(1);
    const workers = pool.take(2);
    const hosts = [...masters, ...workers].map((a) => a.hostId);
    const clusterId = await readyCluster(f, "npk-one", masters, workers, { kubeRoleVersion: FROM });
    const stored = await nodeShelf(f.t.app.keelson).find(FROM);
    const joins = sent.filter((s) => s.name === "node.join" && hosts.includes(s.hostId));
    expect(joins).toHaveLength(3);
    for (const j of joins) {
      expect(j.payload.nodePackage).toEqual({
        roleVersion: FROM,
        url: `/v1/nodePackages/${FROM}/package.tar.gz`,
        sha256: stored?.sha256,
      });
    }

    // The cluster runs a served package: no upgrade onto a version without one.
    const refused = await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {});
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: "node_package_missing", message: expect.stringContaining(PATCH) });
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ kubeRoleVersion: FROM, taskStatus: "success" });

    const patch = build(PATCH);
    expect((await upload(patch)).statusCode).toBe(200);
    const res = await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {});
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const upgrades = sent.filter((s) => s.name === "node.upgrade" && hosts.includes(s.hostId));
    expect(upgrades).toHaveLength(3);
    for (const u of upgrades) {
      expect(u.payload.nodePackage).toEqual({
        roleVersion: PATCH,
        url: `/v1/nodePackages/${PATCH}/package.tar.gz`,
        sha256: sha256(patch),
      });
    }
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ kubeRoleVersion: PATCH, taskStatus: "success" });
    // Every node fetched the package ahead, before the first node was upgraded.
    const prefetches = sent.filter((s) => s.name === "node.prefetch" && hosts.includes(s.hostId));
    expect(prefetches.map((p) => p.hostId).sort()).toEqual([...hosts].sort());
    const firstUpgrade = sent.findIndex((s) => s.name === "node.upgrade" && hosts.includes(s.hostId));
    expect(prefetches.every((p) => sent.indexOf(p) < firstUpgrade)).toBe(true);
    expect([...masters, ...workers].every((a) => a.prefetched.includes(PATCH))).toBe(true);
  });

  it("a node that cannot fetch the target's package fails the upgrade before any node restarts; fixed, it goes through", async () => {
    const masters = pool.take(1);
    const workers = pool.take(1);
    const hosts = [...masters, ...workers].map((a) => a.hostId);
    const clusterId = await readyCluster(f, "npk-prefetch", masters, workers, { kubeRoleVersion: FROM });
    const worker = workers[0] as NonNullable<(typeof workers)[number]>;
    worker.prefetchFailure = "no space left on device";
    expect((await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {})).statusCode).toBe(200);
    await f.idle();
    expect(sent.filter((s) => s.name === "node.upgrade" && hosts.includes(s.hostId))).toEqual([]);
    const failed = await f.cluster(clusterId, "v3");
    expect(failed).toMatchObject({ taskStatus: "error", kubeRoleVersion: FROM, status: "ok" });
    expect(failed.taskError).toContain(`node ${worker.hostname} (${worker.hostId})`);
    expect(failed.taskError).toContain("no space left on device");
    expect(failed.taskError).toContain("no node was upgraded");

    worker.prefetchFailure = undefined;
    expect((await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {})).statusCode).toBe(200);
    await f.idle();
    expect(await f.cluster(clusterId, "v3")).toMatchObject({ taskStatus: "success", kubeRoleVersion: PATCH });
  });

  it("an agent too old for node packages is named, not handed one: the upgrade and the attach fail before touching it", async () => {
    const masters = pool.take(1);
    const workers = pool.take(1);
    const hosts = [...masters, ...workers].map((a) => a.hostId);
    const clusterId = await readyCluster(f, "npk-old-agent", masters, workers, { kubeRoleVersion: FROM });
    const old = workers[0] as NonNullable<(typeof workers)[number]>;
    // The worker comes back as an agent that declares no capabilities (an older release).
    const oldSupports = () => f.t.app.keelson.agents.supports(old.hostId, "node-packages");
    old.capabilities = undefined;
    old.kill();
    await waitFor("the old agent back", () => oldSupports() === false);
    // Its reconnect reaches the node row (what the health check reads) within the presence
    // flush delay; write it now so the request below does not race it.
    await f.t.app.keelson.agents.flushPresence();
    expect((await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {})).statusCode).toBe(200);
    await f.idle();
    expect(
      sent.filter((s) => (s.name === "node.upgrade" || s.name === "node.prefetch") && s.hostId === old.hostId),
    ).toEqual([]);
    expect(sent.filter((s) => s.name === "node.upgrade" && hosts.includes(s.hostId))).toEqual([]);
    const failed = await f.cluster(clusterId, "v3");
    expect(failed).toMatchObject({ taskStatus: "error", kubeRoleVersion: FROM });
    expect(failed.taskError).toContain(`node ${old.hostname} (${old.hostId}) runs an agent too old for node packages`);

    // Attaching an old agent to a cluster whose version has a stored package fails the same way.
    const [spare] = pool.take(1);
    const newcomer = spare as NonNullable<typeof spare>;
    newcomer.capabilities = undefined;
    newcomer.kill();
    await waitFor(
      "the second old agent back",
      () => f.t.app.keelson.agents.supports(newcomer.hostId, "node-packages") === false,
    );
    await f.t.app.keelson.agents.flushPresence();
    expect((await f.attach(clusterId, [w(newcomer.hostId)])).statusCode).toBe(200);
    await f.idle();
    expect(sent.filter((s) => s.name === "node.join" && s.hostId === newcomer.hostId)).toEqual([]);
    expect((await f.cluster(clusterId, "v3")).taskError).toContain("runs an agent too old for node packages");
  });

  it("a cluster on host-installed packages (none stored for its version) upgrades without one, and its nodes get none", async () => {
    const masters = pool.take(1);
    const clusterId = await readyCluster(f, "npk-host", masters, [], {
      kubeRoleVersion: MINOR.replace("1.31.4", "1.31.2"),
    });
    expect(
      sent.find((s) => s.name === "node.join" && s.hostId === masters[0]?.hostId)?.payload.nodePackage,
    ).toBeUndefined();
    const res = await post(f, `/v4/{p}/clusters/${clusterId}/upgrade?type=patch`, {});
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    const upgrade = sent.find((s) => s.name === "node.upgrade" && s.hostId === masters[0]?.hostId);
    expect(upgrade?.payload.kubeRoleVersion).toBe(MINOR);
    expect(upgrade?.payload.nodePackage).toBeUndefined();
  });
});
