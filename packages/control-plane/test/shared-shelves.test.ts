import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { storedPackageChunks, storedPackages } from "@keelson/db";
import { and, asc, eq } from "drizzle-orm";
import { describe, expect, it, vi } from "vitest";
import { requirePackage } from "../src/domain/hosts/agent-upgrade-request.ts";
import { agentShelf } from "../src/domain/packages/agent-shelf.ts";
import { ImageArchiveStore } from "../src/domain/packages/image-archives.ts";
import { ShelfDatabase } from "../src/domain/packages/shelf-database.ts";
import { fakeAgentPackage, sha256, uploadAgentPackage } from "./agent-package-fixtures.ts";
import { ADMIN_TOKEN, createTestApp, TEST_DIALECT, type TestApp } from "./helpers.ts";
import { SHORT, twoReplicas, until } from "./replica-fixtures.ts";
import { fillStore, freeStore } from "./storage-fill.ts";

/**
 * Every replica serves the same packages (issue 17, "Shared secrets and packages"): on
 * PostgreSQL the database holds the shelves, each replica's data dir is a cache it fills from
 * there. The replicas here have data dirs of their own, as on separate machines.
 */

const upload = uploadAgentPackage;

const download = (t: TestApp, version: string) =>
  t.request({ method: "GET", url: `/v1/agentPackages/${version}/package.tar.gz`, token: null });

const fileOn = (t: TestApp, version: string) => join(agentShelf(t.app.keelson).dir, `keelson-agent-${version}.tar.gz`);

/** What the shelf directory holds besides finished packages (staged uploads and fetches). */
const leftovers = (t: TestApp) => {
  const dir = agentShelf(t.app.keelson).dir;
  return existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith(".")) : [];
};

/** A package of about 2.5 MiB: three chunks in the database. */
const threeChunks = (version: string) => fakeAgentPackage(version, {}, { randomBytes: 2_500_000 });

/** A docker archive (`docker save`'s layout) naming busybox:1.36, with 1.5 MiB of layer: two chunks. */
function dockerArchive(): Buffer {
  const src = mkdtempSync(join(tmpdir(), "keelson-images-"));
  try {
    writeFileSync(join(src, "manifest.json"), JSON.stringify([{ Config: "c.json", RepoTags: ["busybox:1.36"] }]));
    writeFileSync(join(src, "layer.bin"), randomBytes(1_500_000));
    execFileSync("tar", ["-cf", join(src, "a.tar"), "-C", src, "manifest.json", "layer.bin"]);
    return readFileSync(join(src, "a.tar"));
  } finally {
    rmSync(src, { recursive: true, force: true });
  }
}

async function chunksOf(t: TestApp, version: string) {
  return t.db
    .select({ seq: storedPackageChunks.seq, data: storedPackageChunks.data })
    .from(storedPackageChunks)
    .innerJoin(storedPackages, eq(storedPackages.id, storedPackageChunks.packageId))
    .where(and(eq(storedPackages.kind, "agent"), eq(storedPackages.version, version)))
    .orderBy(asc(storedPackageChunks.seq));
}

describe.runIf(TEST_DIALECT === "postgres")("package shelves shared by replicas on one database", () => {
  it("a package uploaded through A is listed, served byte-exact and usable on B, which then has the file", async () => {
    const [a, b] = await twoReplicas({}, { ownDataDirs: true });
    expect(b.dataDir).not.toBe(a.dataDir);
    const bytes = threeChunks("3.1.0");
    const stored = await upload(a, bytes);
    expect(stored.statusCode, stored.body).toBe(200);
    expect((await chunksOf(a, "3.1.0")).map((c) => c.data.length)).toEqual([
      1024 * 1024,
      1024 * 1024,
      bytes.length - 2 * 1024 * 1024,
    ]);
    expect(existsSync(fileOn(b, "3.1.0"))).toBe(false);

    const list = await b.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN });
    expect(list.json()).toEqual([stored.json()]);
    expect(stored.json()).toMatchObject({ version: "3.1.0", sha256: sha256(bytes), sizeBytes: bytes.length });
    expect(await requirePackage(b.app.keelson, "3.1.0")).toMatchObject({ sha256: sha256(bytes) });
    const sum = await b.request({ method: "GET", url: "/v1/agentPackages/3.1.0/package.tar.gz.sha256", token: null });
    expect(sum.body).toBe(`${sha256(bytes)}  package.tar.gz\n`);

    const dl = await download(b, "3.1.0");
    expect(dl.statusCode).toBe(200);
    expect(dl.headers["content-length"]).toBe(String(bytes.length));
    expect(Buffer.compare(dl.rawPayload, bytes)).toBe(0);
    expect(Buffer.compare(readFileSync(fileOn(b, "3.1.0")), bytes)).toBe(0);
    expect(readFileSync(`${fileOn(b, "3.1.0")}.sha256`, "utf8")).toBe(`${sha256(bytes)}  keelson-agent-3.1.0.tar.gz\n`);
    expect(leftovers(b)).toEqual([]);
    // The install script on B names the package A stored.
    const script = await b.request({ method: "GET", url: "/v1/install/agent.sh", token: null });
    expect(script.statusCode).toBe(200);
    expect(script.body).toContain(sha256(bytes));
  });

  it("the same version with other bytes through B is a 409 and changes nothing; two replicas racing for a version store one", async () => {
    const [a, b] = await twoReplicas({}, { ownDataDirs: true });
    const first = fakeAgentPackage("3.2.0");
    expect((await upload(a, first)).statusCode).toBe(200);
    const before = await chunksOf(a, "3.2.0");

    const other = await upload(b, fakeAgentPackage("3.2.0", { manifest: { createdAt: "2020-01-01T00:00:00Z" } }));
    expect(other.statusCode).toBe(409);
    expect(other.json()).toMatchObject({ code: "package_exists", message: expect.stringContaining(sha256(first)) });
    expect(await chunksOf(a, "3.2.0")).toEqual(before);
    expect(existsSync(fileOn(b, "3.2.0"))).toBe(false);
    expect(leftovers(b)).toEqual([]);
    expect(Buffer.compare((await download(b, "3.2.0")).rawPayload, first)).toBe(0);
    // The same bytes again through B: 200, nothing new.
    expect((await upload(b, first)).json()).toMatchObject({ sha256: sha256(first) });
    expect(await chunksOf(a, "3.2.0")).toEqual(before);

    const one = threeChunks("3.3.0");
    const two = threeChunks("3.3.0");
    const answers = await Promise.all([upload(a, one), upload(b, two)]);
    expect(answers.map((r) => r.statusCode).sort()).toEqual([200, 409]);
    const winner = answers[0]?.statusCode === 200 ? one : two;
    for (const t of [a, b]) expect(Buffer.compare((await download(t, "3.3.0")).rawPayload, winner)).toBe(0);
  });

  it("a damaged chunk in the database fails B's fetch with a clear error, serves no byte of it and leaves no file", async () => {
    const [a, b] = await twoReplicas({}, { ownDataDirs: true });
    const bytes = threeChunks("3.4.0");
    expect((await upload(a, bytes)).statusCode).toBe(200);
    const [, middle] = await chunksOf(a, "3.4.0");
    const damaged = Buffer.from(middle?.data ?? []);
    damaged[1000] = (damaged[1000] ?? 0) ^ 0xff;
    await a.db.update(storedPackageChunks).set({ data: damaged }).where(eq(storedPackageChunks.seq, 1));

    const dl = await download(b, "3.4.0");
    expect(dl.statusCode).toBe(500);
    expect(dl.json()).toMatchObject({
      code: "package_damaged",
      message: expect.stringContaining(`the database's copy of agent package 3.4.0 is damaged`),
    });
    expect(dl.json().message).toContain(`stored as ${bytes.length} bytes with sha256 ${sha256(bytes)}`);
    expect(existsSync(fileOn(b, "3.4.0"))).toBe(false);
    expect(existsSync(`${fileOn(b, "3.4.0")}.sha256`)).toBe(false);
    expect(leftovers(b)).toEqual([]);
    // A serves its own checked copy still.
    expect(Buffer.compare((await download(a, "3.4.0")).rawPayload, bytes)).toBe(0);
  });

  it("concurrent downloads on B fetch the package from the database once", async () => {
    const [a, b] = await twoReplicas({}, { ownDataDirs: true });
    const bytes = threeChunks("3.5.0");
    expect((await upload(a, bytes)).statusCode).toBe(200);
    const copies = vi.spyOn(ShelfDatabase.prototype, "copyTo");
    try {
      const answers = await Promise.all(Array.from({ length: 6 }, () => download(b, "3.5.0")));
      for (const dl of answers) {
        expect(dl.statusCode).toBe(200);
        expect(Buffer.compare(dl.rawPayload, bytes)).toBe(0);
      }
      expect(copies).toHaveBeenCalledTimes(1);
      // Once in the data dir, served from there.
      expect((await download(b, "3.5.0")).statusCode).toBe(200);
      expect(copies).toHaveBeenCalledTimes(1);
    } finally {
      copies.mockRestore();
    }
  });

  it("an image archive uploaded through A is served byte-exact by B, with its image names, and then kept in B's data dir", async () => {
    const [a, b] = await twoReplicas({}, { ownDataDirs: true });
    const bytes = dockerArchive();
    const stored = await a.request({
      method: "POST",
      url: "/v1/imageArchives",
      payload: bytes,
      headers: { "content-type": "application/octet-stream" },
      token: ADMIN_TOKEN,
    });
    expect(stored.json()).toEqual({
      sha256: sha256(bytes),
      sizeBytes: bytes.length,
      images: ["docker.io/library/busybox:1.36"],
    });
    const onB = new ImageArchiveStore(b.app.keelson);
    expect(await onB.find(sha256(bytes))).toEqual(stored.json());
    expect(existsSync(join(onB.dir, `${sha256(bytes)}.tar`))).toBe(false);

    const got = await b.request({ method: "GET", url: `/v1/imageArchives/${sha256(bytes)}/archive.tar`, token: null });
    expect(got.statusCode).toBe(200);
    expect(Buffer.compare(got.rawPayload, bytes)).toBe(0);
    expect(Buffer.compare(readFileSync(join(onB.dir, `${sha256(bytes)}.tar`)), bytes)).toBe(0);
    expect(JSON.parse(readFileSync(join(onB.dir, `${sha256(bytes)}.json`), "utf8"))).toEqual({
      images: ["docker.io/library/busybox:1.36"],
    });
    expect(readdirSync(onB.dir).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("a database out of space refuses an upload with 507 and keeps nothing of it, in the database or the data dir", async () => {
    const a = await createTestApp({ storageProbeIntervalMs: 100 });
    await fillStore(a, ["stored_package_chunks"]);
    const bytes = threeChunks("3.8.0");
    const refused = await upload(a, bytes);
    expect(refused.statusCode).toBe(507);
    expect(refused.json()).toMatchObject({ code: "storage_full" });
    expect(await a.db.select().from(storedPackages)).toEqual([]);
    expect(existsSync(fileOn(a, "3.8.0"))).toBe(false);
    expect(leftovers(a)).toEqual([]);
    await freeStore(a, ["stored_package_chunks"]);
    let answer = refused;
    await until("the upload taken once there is room", async () => {
      answer = await upload(a, bytes);
      return answer.statusCode === 200;
    });
    expect(answer.json()).toMatchObject({ version: "3.8.0", sha256: sha256(bytes) });
  });

  it("a replica starting with packages in its data dir that the database lacks stores them there", async () => {
    const a = await createTestApp({ settings: { ...SHORT, replicaId: "cp-a" } });
    const bytes = fakeAgentPackage("3.7.0");
    const dataDir = mkdtempSync(join(tmpdir(), "keelson-test-"));
    const shelf = join(dataDir, "packages", "agent");
    mkdirSync(shelf, { recursive: true });
    writeFileSync(join(shelf, "keelson-agent-3.7.0.tar.gz"), bytes);
    writeFileSync(join(shelf, "keelson-agent-3.7.0.tar.gz.sha256"), `${sha256(bytes)}  keelson-agent-3.7.0.tar.gz\n`);
    // A file that no longer matches its checksum stays out.
    writeFileSync(join(shelf, "keelson-agent-3.7.1.tar.gz"), bytes);
    writeFileSync(join(shelf, "keelson-agent-3.7.1.tar.gz.sha256"), `${sha256("other")}  keelson-agent-3.7.1.tar.gz\n`);
    const archive = dockerArchive();
    const images = join(dataDir, "packages", "images");
    mkdirSync(images, { recursive: true });
    writeFileSync(join(images, `${sha256(archive)}.tar`), archive);
    writeFileSync(
      join(images, `${sha256(archive)}.json`),
      `${JSON.stringify({ images: ["docker.io/library/busybox:1.36"] })}\n`,
    );
    expect((await a.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN })).json()).toEqual([]);
    expect(await new ImageArchiveStore(a.app.keelson).find(sha256(archive))).toBeUndefined();

    await createTestApp({ dataDir, databaseOf: a.dataDir, settings: { ...SHORT, replicaId: "cp-b" } });
    expect(await new ImageArchiveStore(a.app.keelson).find(sha256(archive))).toEqual({
      sha256: sha256(archive),
      sizeBytes: archive.length,
      images: ["docker.io/library/busybox:1.36"],
    });
    const list = await a.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN });
    expect(list.json()).toEqual([expect.objectContaining({ version: "3.7.0", sha256: sha256(bytes) })]);
    expect(Buffer.compare((await download(a, "3.7.0")).rawPayload, bytes)).toBe(0);
  });
});

describe.runIf(TEST_DIALECT === "sqlite")("package shelves on SQLite", () => {
  it("are files only: the database holds no package", async () => {
    const t = await createTestApp();
    const bytes = fakeAgentPackage("3.6.0");
    expect((await upload(t, bytes)).statusCode).toBe(200);
    expect(Buffer.compare(readFileSync(fileOn(t, "3.6.0")), bytes)).toBe(0);
    expect(await t.db.select().from(storedPackages)).toEqual([]);
    expect(await t.db.select().from(storedPackageChunks)).toEqual([]);
  });
});
