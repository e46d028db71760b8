import { createReadStream, existsSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { PHASE_IDS, sha256File } from "@keelson/protocol";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { writeOciArchive } from "../../../../test/support/oci-image.ts";
import { ImageArchiveError, missingImages, stageImageArchive } from "../../src/node/image-archives.ts";
import { PhaseEngine } from "../../src/phases/engine.ts";
import { configureRuntime, loadUserImages, startRuntime } from "../../src/phases/impl/runtime.ts";
import type { KubeApi } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { Phase } from "../../src/phases/types.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { FIXTURE_NODE_PACKAGE, fakeHost, nodeConfig, tempDir, testLog } from "../phases/helpers.ts";

/**
 * images.stage's work on a host, against Debian's real containerd and ctr: the archive fetched
 * from a loopback server as from the control plane, checked against the sha256 the link gave,
 * kept among the user images, and imported by the phase engine with the real
 * `ctr -n k8s.io images import` once the runtime runs, then found in `ctr images ls`.
 * Needs root, as containerd does.
 */

const root = tempDir("images");
const supervisors: DirectSupervisor[] = [];
const servers: Server[] = [];

afterAll(async () => {
  for (const s of supervisors) s.close();
  for (const s of servers) await new Promise((r) => s.close(r));
  killAllFromPidFiles(join(root, "host"));
  rmSync(root, { recursive: true, force: true });
});

/** The runtime phases real, every other phase a no-op: the engine runs a node whose runtime is containerd. */
function engineOf(hostRoot: string, services: DirectSupervisor): PhaseEngine {
  const real: Phase[] = [configureRuntime, startRuntime, loadUserImages];
  const noop = PHASE_IDS.filter((id) => !real.some((p) => p.id === id)).map(
    (id): Phase => ({ id, start: async () => undefined, stop: async () => undefined, status: async () => undefined }),
  );
  return new PhaseEngine({
    config: nodeConfig({ hostRoot, primaryIp: "127.0.0.13", role: "worker", host: fakeHost(root) }),
    phases: [...real, ...noop],
    stateFile: join(root, "phases.json"),
    log: testLog(),
    services,
    signCsr: async () => {
      throw new Error("not used");
    },
    kubeApi: { url: "https://unused" } as KubeApi,
    phaseTimeoutMs: 60_000,
  });
}

/** A loopback server handing out `file` under /archive.tar, as the control plane does. */
async function serve(file: string): Promise<string> {
  const server = createServer((req, res) => {
    if (req.url !== "/v1/imageArchives/x/archive.tar") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/x-tar" });
    createReadStream(file).pipe(res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("image archives staged by images.stage", () => {
  it("refuses a download whose sha256 differs, stages the archive, and the engine imports it with the real ctr", async () => {
    const hostRoot = join(root, "host");
    const paths = nodePaths(hostRoot);
    const archive = join(root, "bundle.tar");
    writeOciArchive(join(root, "image"), archive, "example.com/keelson/bundle:2.0");
    const sha256 = await sha256File(archive);
    const controlPlane = await serve(archive);
    const payload = {
      name: "keelson-images-2.0",
      url: "/v1/imageArchives/x/archive.tar",
      sha256,
      images: ["example.com/keelson/bundle:2.0"],
    };

    // Bytes other than the link said: refused, nothing left among the user images.
    await expect(
      stageImageArchive({ ...payload, sha256: "0".repeat(64) }, { dir: paths.userImages, controlPlane }),
    ).rejects.toThrow(ImageArchiveError);
    expect(readdirSync(paths.userImages)).toEqual([]);

    const services = new DirectSupervisor({ hostRoot, log: testLog() });
    supervisors.push(services);
    const engine = engineOf(hostRoot, services);
    // No runtime yet: staged only, imported when the runtime phase runs.
    const file = await stageImageArchive(payload, { dir: paths.userImages, controlPlane });
    expect(file).toBe(join(paths.userImages, "keelson-images-2.0.tar"));
    expect(await sha256File(file)).toBe(sha256);
    await expect(engine.importImages()).resolves.toBeUndefined();
    await expect(engine.listImages()).resolves.toBeUndefined();

    // The node starts: its "load user images" phase imports the staged archive.
    expect(await engine.start()).toEqual({ ok: true });
    const ctr = (...args: string[]) =>
      execa(join(FIXTURE_NODE_PACKAGE, "bin", "ctr"), ["--address", paths.containerdSocket, ...args]);
    expect((await ctr("-n", "k8s.io", "images", "ls", "-q")).stdout.split("\n")).toContain(
      "example.com/keelson/bundle:2.0",
    );
    const listed = await engine.listImages();
    expect(missingImages(payload.images, listed ?? [])).toEqual([]);

    // Removed from the runtime, then staged again (same bytes: no download): imported again now.
    await ctr("-n", "k8s.io", "images", "rm", "example.com/keelson/bundle:2.0");
    expect(missingImages(payload.images, (await engine.listImages()) ?? [])).toEqual(payload.images);
    servers[0]?.close();
    await stageImageArchive(payload, { dir: paths.userImages, controlPlane });
    const after = await engine.importImages();
    expect(after).toContain("example.com/keelson/bundle:2.0");
    expect(existsSync(join(paths.userImages, "keelson-images-2.0.tar"))).toBe(true);

    expect(await engine.stop()).toEqual({ ok: true });
    expect(services.livePids()).toEqual({});
  }, 120_000);
});
