import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
});
