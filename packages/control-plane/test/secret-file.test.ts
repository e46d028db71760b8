import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataDirFullError, storageFull } from "@keelson/db";
import { describe, expect, it } from "vitest";
import { ensureAdminToken } from "../src/domain/identity/admin-token.ts";
import { readOrCreateSecretFile } from "../src/secrets/secret-file.ts";

describe("secret files of the data dir", () => {
  it("creates the file once, 0600, and leaves no temporary file behind", () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-secret-"));
    const file = join(dir, "k");
    expect(readOrCreateSecretFile(file, () => "first")).toBe("first");
    expect(readOrCreateSecretFile(file, () => "second")).toBe("first");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["k"]);
  });

  it("refuses an empty admin-token file instead of accepting an empty token", () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-secret-"));
    writeFileSync(join(dir, "admin-token"), "", { mode: 0o600 });
    expect(() => ensureAdminToken(dir, undefined)).toThrow(/empty/);
    const generated = mkdtempSync(join(tmpdir(), "keelson-secret-"));
    const { token } = ensureAdminToken(generated, undefined);
    expect(token).toMatch(/^kadm_/);
    expect(readFileSync(join(generated, "admin-token"), "utf8").trim()).toBe(token);
  });

  it("on a full disk reads an existing secret without writing, and refuses to make a new one as DataDirFullError, leaving nothing", () => {
    // A real full disk: a 1 MiB tmpfs, filled (root is available in tests and CI).
    const dir = mkdtempSync(join(tmpdir(), "keelson-secret-full-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]);
    try {
      const file = join(dir, "secret.key");
      expect(readOrCreateSecretFile(file, () => "kept")).toBe("kept");
      const free = Number(statfsSync(dir).bavail) * Number(statfsSync(dir).bsize);
      execFileSync("fallocate", ["-l", String(free), join(dir, "filler")]);
      expect(readOrCreateSecretFile(file, () => "other")).toBe("kept");
      let error: unknown;
      try {
        readOrCreateSecretFile(join(dir, "webcli.key"), () => "x".repeat(8192));
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(DataDirFullError);
      expect(storageFull(error)).toMatchObject({ where: "data-dir" });
      expect(readdirSync(dir).sort()).toEqual(["filler", "secret.key"]);
    } finally {
      execFileSync("umount", [dir]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
