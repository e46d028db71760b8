import { execFileSync } from "node:child_process";
import { createHash, randomBytes as random } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ADMIN_TOKEN, type TestApp } from "./helpers.ts";

/** POST /v1/agentPackages with `body` as the tarball, by the admin unless `token` says otherwise. */
export const uploadAgentPackage = (t: TestApp, body: Buffer, token: string | null = ADMIN_TOKEN) =>
  t.request({
    method: "POST",
    url: "/v1/agentPackages",
    payload: body,
    headers: { "content-type": "application/octet-stream" },
    token,
  });

export const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/**
 * A small agent package shaped like `pnpm pack:agent`'s (manifest.json + listed files), built
 * with the system's tar in milliseconds; `tamper` breaks it in one way for refusal tests.
 * `randomBytes` adds a listed file of that many random bytes (a package of several MiB, which
 * gzip cannot shrink).
 */
export function fakeAgentPackage(
  version: string,
  tamper: { badHash?: boolean; extraFile?: boolean; manifest?: Record<string, unknown> } = {},
  { randomBytes = 0 } = {},
): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "keelson-fake-pkg-"));
  try {
    const entry = `// keelson-agent ${version}\n`;
    writeFileSync(join(dir, "agent.mjs"), entry);
    if (tamper.extraFile) writeFileSync(join(dir, "stowaway.sh"), "#!/bin/sh\n");
    const noise = randomBytes > 0 ? { "noise.bin": random(randomBytes) } : {};
    for (const [name, data] of Object.entries(noise)) writeFileSync(join(dir, name), data);
    const manifest = {
      format: 1,
      name: "keelson-agent",
      version,
      entry: "agent.mjs",
      nodeMajor: 20,
      createdAt: new Date().toISOString(),
      files: {
        "agent.mjs": tamper.badHash ? sha256("something else") : sha256(entry),
        ...Object.fromEntries(Object.entries(noise).map(([name, data]) => [name, sha256(data)])),
      },
      ...tamper.manifest,
    };
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
    const files = ["manifest.json", "agent.mjs", ...Object.keys(noise), ...(tamper.extraFile ? ["stowaway.sh"] : [])];
    const out = join(dir, "pkg.tar.gz");
    execFileSync("tar", ["-czf", out, "-C", dir, ...files]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
