import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeOciArchive } from "../../../test/support/oci-image.ts";
import { archiveImageNames, dockerNormalised, ImageArchiveStore } from "../src/domain/packages/image-archives.ts";
import { sha256 } from "./agent-package-fixtures.ts";
import { ADMIN_TOKEN } from "./helpers.ts";
import { type Fleet, startFleet, waitFor } from "./membership-harness.ts";
import { FleetAllocator, readyCluster } from "./rollout-harness.ts";

/**
 * Image archives (the operator's `dockerRepo`, spec §4.9 step 4): stored by content with the
 * image names they carry, served to agents, and staged on hosts over their links
 * (images.stage), with the host runtime's list asked of its agent (images.list). The agents
 * here are simulated; packages/agent/test/node/image-archives.test.ts runs the agent's side
 * against the real containerd.
 */

let f: Fleet;
let pool: FleetAllocator;
const dir = mkdtempSync(join(tmpdir(), "keelson-images-"));
const oci = join(dir, "oci.tar");
const docker = join(dir, "docker.tar");

const upload = (body: Buffer, token: string | null = ADMIN_TOKEN) =>
  f.t.request({
    method: "POST",
    url: "/v1/imageArchives",
    payload: body,
    headers: { "content-type": "application/octet-stream" },
    token,
  });
const stage = (hostId: string, payload: Record<string, unknown>, token: string | null = ADMIN_TOKEN) =>
  f.t.request({ method: "POST", url: `/v1/hosts/${hostId}/images`, payload, token });

beforeAll(async () => {
  f = await startFleet(3, { namePrefix: "img", phaseTimeMs: 30 });
  pool = new FleetAllocator(f);
  writeOciArchive(join(dir, "oci"), oci, "example.com/keelson/pause:3.10");
  // A docker archive (`docker save`'s layout): the control plane reads only manifest.json.
  writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify([{ Config: "c.json", RepoTags: ["busybox:1.36", "quay.io/x/y:2"], Layers: [] }]),
  );
  execFileSync("tar", ["-cf", docker, "-C", dir, "manifest.json"]);
});
afterAll(async () => {
  await f.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("image archives", () => {
  it("reads the image names as containerd's importer gives them", async () => {
    expect(await archiveImageNames(oci)).toEqual(["example.com/keelson/pause:3.10"]);
    expect(await archiveImageNames(docker)).toEqual(["docker.io/library/busybox:1.36", "quay.io/x/y:2"]);
    expect(dockerNormalised("keelson/agent:1")).toBe("docker.io/keelson/agent:1");
    expect(dockerNormalised("localhost/a:1")).toBe("localhost/a:1");
  });

  it("refuses an empty body, a tar that is no image archive, and non-admins; stores nothing", async () => {
    const empty = await upload(Buffer.alloc(0));
    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toMatchObject({ field: "archive", message: expect.stringContaining("the body is empty") });
    writeFileSync(join(dir, "readme.txt"), "hello");
    execFileSync("tar", ["-cf", join(dir, "plain.tar"), "-C", dir, "readme.txt"]);
    const plain = await upload(readFileSync(join(dir, "plain.tar")));
    expect(plain.statusCode).toBe(400);
    expect(plain.json()).toMatchObject({ field: "archive", message: expect.stringContaining("not an image archive") });
    expect((await upload(readFileSync(oci), f.t.token)).statusCode).toBe(403);
    const shelf = new ImageArchiveStore(f.t.app.keelson).dir;
    expect(existsSync(shelf) ? readdirSync(shelf) : []).toEqual([]);
  });

  it("stores an archive once by its sha256 and serves it", async () => {
    const bytes = readFileSync(oci);
    const first = await upload(bytes);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toEqual({
      sha256: sha256(bytes),
      sizeBytes: bytes.length,
      images: ["example.com/keelson/pause:3.10"],
    });
    expect((await upload(bytes)).json()).toEqual(first.json());
    const got = await f.t.request({
      method: "GET",
      url: `/v1/imageArchives/${sha256(bytes)}/archive.tar`,
      token: null,
    });
    expect(got.statusCode).toBe(200);
    expect(sha256(got.rawPayload)).toBe(sha256(bytes));
    const missing = await f.t.request({
      method: "GET",
      url: `/v1/imageArchives/${"a".repeat(64)}/archive.tar`,
      token: null,
    });
    expect(missing.statusCode).toBe(404);
  });

  it("stages an archive on hosts: imported on a node, only staged on a host in no cluster; lists the node's images", async () => {
    const [node, loose] = pool.take(2) as [(typeof f.sim.agents)[number], (typeof f.sim.agents)[number]];
    await readyCluster(f, "img-cluster", [node], []);
    const archive = (await upload(readFileSync(docker))).json() as { sha256: string; images: string[] };

    const unknown = await stage(node.hostId, { name: "bundle", sha256: "b".repeat(64) });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toMatchObject({ field: "sha256", message: expect.stringContaining("upload it first") });
    const badName = await stage(node.hostId, { name: "../etc", sha256: archive.sha256 });
    expect(badName.statusCode).toBe(400);
    expect(badName.json()).toMatchObject({ field: expect.stringContaining("name") });
    expect((await stage(node.hostId, { name: "bundle", sha256: archive.sha256 }, f.t.token)).statusCode).toBe(403);
    expect(node.stagedImages.size).toBe(0);

    const onNode = await stage(node.hostId, { name: "bundle-1.36", sha256: archive.sha256 });
    expect(onNode.statusCode, onNode.body).toBe(200);
    expect(onNode.json()).toEqual({ imported: true, listed: archive.images });
    expect(node.stagedImages.get("bundle-1.36")).toBe(archive.sha256);
    const onLoose = await stage(loose.hostId, { name: "bundle-1.36", sha256: archive.sha256 });
    expect(onLoose.json()).toEqual({ imported: false, listed: [] });

    const listed = await f.t.request({ method: "GET", url: `/v1/hosts/${node.hostId}/images`, token: ADMIN_TOKEN });
    expect(listed.json()).toEqual({ listed: archive.images });
    const noRuntime = await f.t.request({ method: "GET", url: `/v1/hosts/${loose.hostId}/images`, token: ADMIN_TOKEN });
    expect(noRuntime.statusCode).toBe(502);
    expect(noRuntime.json().message).toContain("no container runtime runs on this host");

    await loose.stop();
    await waitFor("the agent gone", () => !f.t.app.keelson.agents.isConnected(loose.hostId), 10_000);
    const offline = await stage(loose.hostId, { name: "bundle-1.36", sha256: archive.sha256 });
    expect(offline.statusCode).toBe(409);
    expect(offline.json()).toMatchObject({ code: "host_offline" });
  });
});
