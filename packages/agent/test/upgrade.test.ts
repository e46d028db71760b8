import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StateDir } from "../src/state-dir.ts";
import { downloadPackage, fetchPublishedSha256 } from "../src/upgrade/download.ts";
import { ManifestError, verifyPackageDir } from "../src/upgrade/manifest.ts";
import { readUpgradeOutcome } from "../src/upgrade/status.ts";
import { unpackTarball } from "../src/upgrade/unpack.ts";
import { UpgradeBusyError, Upgrader } from "../src/upgrade/upgrader.ts";
import { VersionStore } from "../src/upgrade/versions.ts";
import { makePackage, sha256, tempRoot } from "./package-fixtures.ts";

const log = pino({ level: "silent" });
const root = tempRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Unpacks a package into a fresh dir and verifies it. */
async function unpackAndVerify(file: string, expectedVersion?: string) {
  const dir = join(tempRoot("keelson-unpack-"));
  await unpackTarball(file, dir);
  try {
    return await verifyPackageDir(dir, expectedVersion);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("package manifest", () => {
  const out = join(root, "manifests");

  it("accepts a package whose files match the manifest", async () => {
    const pkg = makePackage(out, { version: "2.0.0", files: { "agent.mjs": "x", "lib/a.js": "y" } });
    const manifest = await unpackAndVerify(pkg.file, "2.0.0");
    expect(manifest.version).toBe("2.0.0");
    expect(manifest.files).toEqual({ "agent.mjs": sha256("x"), "lib/a.js": sha256("y") });
  });

  const setFile = (path: string, hash: string) => (m: Record<string, unknown>) => {
    (m.files as Record<string, string>)[path] = hash;
  };
  const broken: [string, Parameters<typeof makePackage>[1], RegExp][] = [
    ["a package without a manifest", { version: "2.0.0", noManifest: true }, /has no manifest.json/],
    ["an empty manifest", { version: "2.0.0", rawManifest: "" }, /not valid JSON/],
    ["a manifest that is not JSON", { version: "2.0.0", rawManifest: "{nope" }, /not valid JSON/],
    [
      "another package's manifest",
      { version: "2.0.0", editManifest: (m) => Object.assign(m, { name: "other" }) },
      /name/,
    ],
    [
      "a manifest without files",
      { version: "2.0.0", editManifest: (m) => Reflect.deleteProperty(m, "files") },
      /files/,
    ],
    [
      "a file that differs from its hash",
      { version: "2.0.0", editManifest: setFile("agent.mjs", sha256("other")) },
      /does not match its sha256/,
    ],
    ["a listed file that is missing", { version: "2.0.0", editManifest: setFile("gone.js", sha256("")) }, /missing/],
    ["a file the manifest does not list", { version: "2.0.0", unlisted: { "extra.js": "evil" } }, /does not list/],
    [
      "an entry that is not among the files",
      { version: "2.0.0", editManifest: (m) => Object.assign(m, { entry: "main.js" }) },
      /entry/,
    ],
    [
      "a path leaving the package",
      { version: "2.0.0", editManifest: setFile("../x", sha256("")) },
      /leaves the package/,
    ],
  ];
  for (const [what, options, message] of broken) {
    it(`refuses ${what}`, async () => {
      const pkg = makePackage(out, options);
      await expect(unpackAndVerify(pkg.file, "2.0.0")).rejects.toThrow(message);
    });
  }

  it("refuses a package of another version than the one requested", async () => {
    const pkg = makePackage(out, { version: "2.0.1" });
    await expect(unpackAndVerify(pkg.file, "2.0.0")).rejects.toThrow(ManifestError);
    await expect(unpackAndVerify(pkg.file, "2.0.0")).rejects.toThrow(/version 2.0.1, but version 2.0.0/);
  });
});

describe("download", () => {
  let server: Server;
  let base: string;
  const body = Buffer.from("package bytes ".repeat(1000));
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === "/pkg.tar.gz") return res.end(body);
      if (req.url === "/pkg.tar.gz.sha256") return res.end(`${sha256(body)}  pkg.tar.gz\n`);
      if (req.url === "/garbage.tar.gz.sha256") return res.end("not a hash\n");
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("fetches over http and hashes on the way", async () => {
    const dest = join(root, "dl-http");
    const result = await downloadPackage(`${base}/pkg.tar.gz`, dest);
    expect(result).toEqual({ sha256: sha256(body), bytes: body.length });
    expect(readFileSync(dest).equals(body)).toBe(true);
    expect(await fetchPublishedSha256(`${base}/pkg.tar.gz`)).toBe(sha256(body));
  });

  it("copies file URLs and reads their .sha256", async () => {
    const pkg = makePackage(join(root, "dl-file"), { version: "1.0.0" });
    const result = await downloadPackage(pkg.url, join(root, "dl-file-copy"));
    expect(result.sha256).toBe(pkg.sha256);
    expect(await fetchPublishedSha256(pkg.url)).toBe(pkg.sha256);
  });

  it("says what went wrong: 404, missing file, oversize, no or bad checksum file", async () => {
    await expect(downloadPackage(`${base}/missing.tar.gz`, join(root, "x1"))).rejects.toThrow(/HTTP 404/);
    await expect(downloadPackage("file:///nonexistent/pkg.tar.gz", join(root, "x2"))).rejects.toThrow(/does not exist/);
    await expect(downloadPackage(`${base}/pkg.tar.gz`, join(root, "x3"), { maxBytes: 100 })).rejects.toThrow(
      /larger than 100 bytes/,
    );
    expect(await fetchPublishedSha256(`${base}/missing.tar.gz`)).toBeUndefined();
    expect(await fetchPublishedSha256("file:///nonexistent/pkg.tar.gz")).toBeUndefined();
    await expect(fetchPublishedSha256(`${base}/garbage.tar.gz`)).rejects.toThrow(/does not hold a sha256/);
    await expect(downloadPackage("http://127.0.0.1:1/pkg.tar.gz", join(root, "x4"))).rejects.toThrow(/failed/);
  });
});

describe("installed versions", () => {
  function storeWith(...versions: string[]): VersionStore {
    const store = new VersionStore(join(tempRoot("keelson-versions-"), "versions")).ensure();
    for (const v of versions) {
      mkdirSync(join(store.dir, v));
      writeFileSync(join(store.dir, v, "manifest.json"), JSON.stringify({ entry: "agent.mjs" }));
      writeFileSync(join(store.dir, v, "agent.mjs"), "");
    }
    return store;
  }

  it("switches current atomically, keeps previous and records the trial", () => {
    const store = storeWith("1.0.0", "2.0.0");
    const first = store.switchTo("1.0.0");
    expect(first.previous).toBeNull();
    expect(readlinkSync(store.currentLink)).toBe("1.0.0");
    expect(existsSync(store.previousLink)).toBe(false);

    const trial = store.switchTo("2.0.0");
    expect(trial).toMatchObject({ version: "2.0.0", previous: "1.0.0" });
    expect(readlinkSync(store.currentLink)).toBe("2.0.0");
    expect(readlinkSync(store.previousLink)).toBe("1.0.0");
    expect(store.readTrial()).toEqual(trial);
    expect(store.installed("current")?.entry).toBe(join(store.dir, "2.0.0", "agent.mjs"));
    // No temporary links left behind by the rename-over switch.
    expect(readdirSync(store.dir).sort()).toEqual(["1.0.0", "2.0.0", "current", "previous", "trial.json"]);
  });

  it("rolls back to the previous version, or to the workspace when there was none", () => {
    const store = storeWith("1.0.0", "2.0.0");
    store.switchTo("1.0.0");
    store.clearTrial();
    const trial = store.switchTo("2.0.0");
    store.rollback(trial);
    expect(readlinkSync(store.currentLink)).toBe("1.0.0");
    expect(store.readTrial()).toBeUndefined();

    const fresh = storeWith("1.0.0");
    fresh.rollback(fresh.switchTo("1.0.0"));
    expect(existsSync(fresh.currentLink)).toBe(false);
  });

  it("never replaces the running version and prunes the rest", async () => {
    const store = storeWith("1.0.0", "2.0.0", "3.0.0");
    store.switchTo("2.0.0");
    store.switchTo("3.0.0");
    const staging = store.stagingDir();
    await expect(store.install(staging, "3.0.0")).rejects.toThrow(/current version/);
    writeFileSync(store.tempFile(".tar.gz"), "leftover");
    const removed = await store.prune();
    expect(removed.sort()).toEqual(expect.arrayContaining(["1.0.0"]));
    expect(readdirSync(store.dir).sort()).toEqual(["2.0.0", "3.0.0", "current", "previous", "trial.json"]);
  });
});

describe("upgrader", () => {
  function setup(currentVersion = "1.0.0") {
    const stateDir = new StateDir(tempRoot("keelson-upgrader-")).ensure();
    const changes: { status: string; error: string | undefined }[] = [];
    const restarts: string[] = [];
    let restarted: () => void = () => {};
    const restartedOnce = new Promise<void>((r) => {
      restarted = r;
    });
    const upgrader = new Upgrader({
      stateDir,
      currentVersion,
      log,
      onChange: (s) => changes.push(s),
      restart: async (version) => {
        restarts.push(version);
        restarted();
      },
    });
    return { stateDir, upgrader, changes, restarts, restartedOnce };
  }
  const out = join(root, "upgrader-packages");

  it("downloads, verifies, installs beside the old version, switches and asks for a restart", async () => {
    const { stateDir, upgrader, changes, restarts, restartedOnce } = setup();
    const pkg = makePackage(out, { version: "2.0.0" });
    expect(upgrader.start({ name: "keelson-agent", version: "2.0.0", url: pkg.url })).toEqual({
      accepted: true,
      status: "updating",
    });
    expect(upgrader.status).toBe("updating");
    expect(() => upgrader.start({ name: "keelson-agent", version: "2.0.0", url: pkg.url })).toThrow(UpgradeBusyError);
    await restartedOnce;
    expect(restarts).toEqual(["2.0.0"]);
    expect(changes).toEqual([{ status: "updating", error: undefined }]);
    const versions = stateDir.path("versions");
    expect(readlinkSync(join(versions, "current"))).toBe("2.0.0");
    expect(JSON.parse(readFileSync(join(versions, "trial.json"), "utf8"))).toMatchObject({
      version: "2.0.0",
      previous: null,
    });
    expect(readUpgradeOutcome(stateDir)).toMatchObject({ state: "switched", version: "2.0.0", from: "1.0.0" });
    expect(readdirSync(versions).filter((n) => n.startsWith("."))).toEqual([]);
    // Until the process restarts it is still updating, and refuses another upgrade.
    expect(() => upgrader.start({ name: "k", version: "3.0.0", url: pkg.url })).toThrow(UpgradeBusyError);
  });

  async function failedUpgrade(request: { version: string; url: string; sha256?: string }) {
    const { stateDir, upgrader, changes, restarts } = setup();
    upgrader.start({ name: "keelson-agent", ...request });
    expect(upgrader.status).toBe("updating");
    expect(await upgrader.settled()).toBe(false);
    expect(restarts).toEqual([]);
    expect(upgrader.status).toBe("running");
    expect(changes.at(-1)).toEqual({ status: "running", error: upgrader.error });
    expect(readUpgradeOutcome(stateDir)).toMatchObject({
      state: "failed",
      version: request.version,
      error: upgrader.error,
    });
    const versions = stateDir.path("versions");
    expect(existsSync(join(versions, "current"))).toBe(false);
    // Nothing left of the attempt but its record.
    expect(readdirSync(versions)).toEqual([]);
    return upgrader.error ?? "";
  }

  it("refuses a package whose checksum does not match, given in the request or beside it", async () => {
    const pkg = makePackage(out, { version: "2.0.0" });
    expect(await failedUpgrade({ version: "2.0.0", url: pkg.url, sha256: sha256("something else") })).toMatch(
      /upgrade to 2.0.0 failed: checksum mismatch/,
    );
    writeFileSync(`${pkg.file}.sha256`, `${sha256("tampered")}  x\n`);
    expect(await failedUpgrade({ version: "2.0.0", url: pkg.url })).toMatch(/checksum mismatch/);
  });

  it("refuses a package without any checksum", async () => {
    const pkg = makePackage(out, { version: "2.0.0", sidecar: false });
    expect(await failedUpgrade({ version: "2.0.0", url: pkg.url })).toMatch(/no sha256 was given/);
  });

  it("refuses a corrupt tarball and a bad manifest, keeping the old version", async () => {
    const corrupt = join(out, "corrupt.tar.gz");
    writeFileSync(corrupt, "this is not gzip");
    expect(
      await failedUpgrade({ version: "2.0.0", url: `file://${corrupt}`, sha256: sha256("this is not gzip") }),
    ).toMatch(/unpacking the package failed/);
    const wrongVersion = makePackage(out, { version: "2.0.1" });
    expect(await failedUpgrade({ version: "2.0.0", url: wrongVersion.url })).toMatch(
      /version 2.0.1, but version 2.0.0/,
    );
    expect(await failedUpgrade({ version: "2.0.0", url: "file:///nonexistent.tar.gz" })).toMatch(/does not exist/);
  });

  it("treats a request for the running version as nothing to do", () => {
    const { upgrader, changes } = setup("2.0.0");
    expect(upgrader.start({ name: "k", version: "2.0.0", url: "file:///x" })).toEqual({
      accepted: false,
      status: "running",
    });
    expect(changes).toEqual([]);
  });

  it("reports the last failure after a restart, until the next upgrade starts", async () => {
    const { stateDir, upgrader } = setup();
    upgrader.start({ name: "k", version: "2.0.0", url: "file:///nonexistent.tar.gz" });
    await upgrader.settled();
    const again = new Upgrader({ stateDir, currentVersion: "1.0.0", log, onChange: () => {}, restart: async () => {} });
    expect(again.error).toMatch(/upgrade to 2.0.0 failed/);
    again.start({ name: "k", version: "3.0.0", url: "file:///nonexistent.tar.gz" });
    expect(again.error).toBeUndefined();
    await again.settled();
    expect(again.error).toMatch(/upgrade to 3.0.0 failed/);
  });
});
