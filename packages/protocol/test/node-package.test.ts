import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PackageError, verifyNodePackageDir } from "../src/index.ts";

/** The node package checks an agent and the control plane both run (issue 5). */

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const sha = (s: string) => createHash("sha256").update(s).digest("hex");

function unpacked(edit: (m: Record<string, unknown>, dir: string) => void = () => {}): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-node-manifest-"));
  roots.push(dir);
  mkdirSync(join(dir, "bin"));
  const kubelet = "#!/bin/sh\necho kubelet\n";
  writeFileSync(join(dir, "bin", "kubelet"), kubelet);
  const manifest: Record<string, unknown> = {
    format: 1,
    name: "keelson-node",
    roleVersion: "1.30.8-kls.1",
    kubernetesVersion: "v1.30.8",
    createdAt: new Date().toISOString(),
    binaries: { kubelet: { kind: "real", source: "upstream", version: "v1.30.8" } },
    files: { "bin/kubelet": sha(kubelet) },
  };
  edit(manifest, dir);
  writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
  return dir;
}

describe("verifyNodePackageDir", () => {
  it("accepts a whole package and returns its manifest", async () => {
    expect((await verifyNodePackageDir(unpacked(), "1.30.8-kls.1")).kubernetesVersion).toBe("v1.30.8");
  });

  it.each([
    ["another role version than asked", () => {}, "1.31.4-kls.1", /is for role version 1.30.8-kls.1, but 1.31.4-kls.1/],
    [
      "a binary without its bin/ file",
      (m: Record<string, unknown>) => {
        (m.binaries as Record<string, unknown>).etcd = { kind: "real", source: "x", version: "3.4" };
      },
      undefined,
      /binary "etcd" has no file bin\/etcd/,
    ],
    [
      "a file the manifest does not list",
      (_m: Record<string, unknown>, dir: string) => writeFileSync(join(dir, "bin", "extra"), "x"),
      undefined,
      /holds "bin\/extra", which manifest.json does not list/,
    ],
    [
      "a file that does not match its sha256",
      (_m: Record<string, unknown>, dir: string) => writeFileSync(join(dir, "bin", "kubelet"), "tampered"),
      undefined,
      /"bin\/kubelet" does not match its sha256/,
    ],
    [
      "an agent manifest",
      (m: Record<string, unknown>) => {
        m.name = "keelson-agent";
      },
      undefined,
      /manifest.json: name/,
    ],
    [
      "a role version that cannot be a directory name",
      (m: Record<string, unknown>) => {
        m.roleVersion = "../1.30";
      },
      undefined,
      /manifest.json: roleVersion/,
    ],
  ])("refuses %s", async (_what, edit, expected, message) => {
    const attempt = verifyNodePackageDir(unpacked(edit), expected);
    await expect(attempt).rejects.toBeInstanceOf(PackageError);
    await expect(verifyNodePackageDir(unpacked(edit), expected)).rejects.toThrow(message);
  });
});
