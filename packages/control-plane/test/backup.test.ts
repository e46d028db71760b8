import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "@keelson/db";
import { afterEach, describe, expect, it } from "vitest";
import { BackupRefused, backupControlPlane } from "../src/commands/backup.ts";
import { restoreControlPlane } from "../src/commands/restore.ts";
import { readServerSettings } from "../src/settings.ts";
import { SERVER_VERSION } from "../src/version.ts";

/**
 * What a backup carries besides the database (test/e2e/backup.test.ts runs the commands on both
 * stores): every secret of the data dir, the TLS CA that agents pin included, and nothing a
 * doctored manifest points at outside the backup.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function temp(): string {
  const d = mkdtempSync(join(tmpdir(), "keelson-backup-"));
  dirs.push(d);
  return d;
}

async function dataDirWithSecrets(): Promise<string> {
  const dataDir = temp();
  await (
    await openStore({ dialect: "sqlite", file: join(dataDir, "keelson.sqlite"), binaryVersion: SERVER_VERSION })
  ).close();
  writeFileSync(join(dataDir, "secret.key"), "sealing key\n");
  writeFileSync(join(dataDir, "admin-token"), "kadm_admin\n");
  mkdirSync(join(dataDir, "tls", "next"), { recursive: true });
  writeFileSync(join(dataDir, "tls", "ca.key"), "the CA agents pin\n");
  writeFileSync(join(dataDir, "tls", "ca.crt"), "its certificate\n");
  writeFileSync(join(dataDir, "tls", "next", "ca.key"), "a staged next CA\n");
  return dataDir;
}

describe("control-plane backup contents", () => {
  it("carries the secrets and the TLS CA (a staged next CA too), each file 0600, and restores them onto a new data dir", async () => {
    const dataDir = await dataDirWithSecrets();
    const dir = join(temp(), "b");
    const manifest = await backupControlPlane(readServerSettings({ KEELSON_DATA_DIR: dataDir }), dir);
    expect(manifest.files.map((f) => f.name)).toEqual([
      "admin-token",
      "keelson.sqlite",
      "secret.key",
      "tls/ca.crt",
      "tls/ca.key",
      "tls/next/ca.key",
    ]);
    for (const f of manifest.files) expect(statSync(join(dir, f.name)).mode & 0o777, f.name).toBe(0o600);

    const fresh = join(temp(), "new-host");
    await restoreControlPlane(readServerSettings({ KEELSON_DATA_DIR: fresh }), dir);
    for (const name of ["secret.key", "admin-token", "tls/ca.key", "tls/ca.crt", "tls/next/ca.key"]) {
      expect(readFileSync(join(fresh, name), "utf8"), name).toBe(readFileSync(join(dataDir, name), "utf8"));
      expect(statSync(join(fresh, name)).mode & 0o777, name).toBe(0o600);
    }
  });

  it("refuses a manifest that names a file outside the backup, touching nothing", async () => {
    const dataDir = await dataDirWithSecrets();
    const dir = join(temp(), "b");
    await backupControlPlane(readServerSettings({ KEELSON_DATA_DIR: dataDir }), dir);
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
    manifest.files.push({ name: "../../etc/passwd", bytes: 1, sha256: "0" });
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
    const target = temp();
    await expect(restoreControlPlane(readServerSettings({ KEELSON_DATA_DIR: target }), dir)).rejects.toThrow(
      new BackupRefused(`${join(dir, "manifest.json")} names a file outside the backup: ../../etc/passwd`),
    );
    expect(() => statSync(join(target, "keelson.sqlite"))).toThrow(/ENOENT/);
  });
});
