import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packAgent } from "../../../scripts/pack-agent.ts";
import { agentShelf } from "../src/domain/packages/agent-shelf.ts";
import { fakeAgentPackage, sha256, uploadAgentPackage } from "./agent-package-fixtures.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const upload = uploadAgentPackage;

describe("agent packages served by the control plane", () => {
  let t: TestApp;
  let real: { file: string; sha256: string; version: string };
  const out = mkdtempSync(join(tmpdir(), "keelson-pkg-out-"));

  beforeAll(async () => {
    t = await createTestApp();
    // One real package, as `pnpm pack:agent` builds it (esbuild bundle; a few seconds).
    real = await packAgent({ version: "7.7.7-cp", out });
  }, 60_000);
  afterAll(async () => {
    await t.close();
    rmSync(out, { recursive: true, force: true });
  });

  it("stores an uploaded real package, lists it and serves it with its sha256 to anyone", async () => {
    const bytes = readFileSync(real.file);
    const res = await upload(t, bytes);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ version: "7.7.7-cp", sha256: real.sha256, sizeBytes: bytes.length });
    const stored = join(agentShelf(t.app.keelson).dir, "keelson-agent-7.7.7-cp.tar.gz");
    expect(sha256(readFileSync(stored))).toBe(real.sha256);
    expect(readFileSync(`${stored}.sha256`, "utf8")).toBe(`${real.sha256}  keelson-agent-7.7.7-cp.tar.gz\n`);

    const list = await t.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN });
    expect(list.json()).toEqual([expect.objectContaining({ version: "7.7.7-cp", sha256: real.sha256 })]);

    // Public: an agent downloads with a plain GET, no token.
    const dl = await t.request({ method: "GET", url: "/v1/agentPackages/7.7.7-cp/package.tar.gz", token: null });
    expect(dl.statusCode).toBe(200);
    expect(dl.headers["content-type"]).toBe("application/gzip");
    expect(sha256(dl.rawPayload)).toBe(real.sha256);
    const sum = await t.request({
      method: "GET",
      url: "/v1/agentPackages/7.7.7-cp/package.tar.gz.sha256",
      token: null,
    });
    expect(sum.statusCode).toBe(200);
    expect(sum.body).toBe(`${real.sha256}  package.tar.gz\n`);

    // The same bytes again change nothing; other bytes under the same version are refused.
    expect((await upload(t, bytes)).statusCode).toBe(200);
    const clash = await upload(t, fakeAgentPackage("7.7.7-cp"));
    expect(clash.statusCode).toBe(409);
    expect(sha256(readFileSync(stored))).toBe(real.sha256);
  });

  it("imports a package from a local path (admin)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-import-"));
    try {
      const file = join(dir, "pkg.tar.gz");
      writeFileSync(file, fakeAgentPackage("1.2.3-import"));
      const res = await t.request({
        method: "POST",
        url: "/v1/agentPackages/import",
        payload: { path: file },
        token: ADMIN_TOKEN,
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ version: "1.2.3-import" });
      const rel = await t.request({
        method: "POST",
        url: "/v1/agentPackages/import",
        payload: { path: "pkg.tar.gz" },
        token: ADMIN_TOKEN,
      });
      expect(rel.statusCode).toBe(400);
      expect(rel.json().field).toBe("path");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    ["not a tarball", Buffer.from("definitely not gzip"), "not a gzipped tarball"],
    ["a file whose hash does not match", fakeAgentPackage("6.0.0", { badHash: true }), "does not match its sha256"],
    ["a file the manifest does not list", fakeAgentPackage("6.0.1", { extraFile: true }), "does not list"],
    ["a manifest of another name", fakeAgentPackage("6.0.2", { manifest: { name: "evil" } }), "manifest.json: name"],
    ["a version that is not a file name", fakeAgentPackage("6.0.3", { manifest: { version: "../x" } }), "version"],
    ["an empty body", Buffer.alloc(0), "empty"],
  ])("refuses %s with a 400 naming package, storing nothing", async (_what, body, message) => {
    const before = await t.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN });
    const res = await upload(t, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ field: "package" });
    expect(res.json().message).toContain(message);
    const after = await t.request({ method: "GET", url: "/v1/agentPackages", token: ADMIN_TOKEN });
    expect(after.json()).toEqual(before.json());
    // No staging leftovers either.
    expect(readdirSync(agentShelf(t.app.keelson).dir).filter((f) => f.startsWith("."))).toEqual([]);
  });

  it("is admin-only for upload, import and list; unknown versions are 404", async () => {
    expect((await upload(t, fakeAgentPackage("5.0.0"), t.token)).statusCode).toBe(403);
    expect((await upload(t, fakeAgentPackage("5.0.0"), null)).statusCode).toBe(403);
    expect((await t.request({ method: "GET", url: "/v1/agentPackages" })).statusCode).toBe(403);
    const missing = await t.request({ method: "GET", url: "/v1/agentPackages/0.0.1/package.tar.gz", token: null });
    expect(missing.statusCode).toBe(404);
    expect(existsSync(join(agentShelf(t.app.keelson).dir, "keelson-agent-5.0.0.tar.gz"))).toBe(false);
  });
});
