import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/**
 * A small agent package shaped like `pnpm pack:agent`'s (manifest.json + listed files), built
 * with the system's tar in milliseconds; `tamper` breaks it in one way for refusal tests.
 */
export function fakeAgentPackage(
  version: string,
  tamper: { badHash?: boolean; extraFile?: boolean; manifest?: Record<string, unknown> } = {},
): Buffer {
  const dir = mkdtempSync(join(tmpdir(), "keelson-fake-pkg-"));
  try {
    const entry = `// keelson-agent ${version}\n`;
    writeFileSync(join(dir, "agent.mjs"), entry);
    if (tamper.extraFile) writeFileSync(join(dir, "stowaway.sh"), "#!/bin/sh\n");
    const manifest = {
      format: 1,
      name: "keelson-agent",
      version,
      entry: "agent.mjs",
      nodeMajor: 20,
      createdAt: new Date().toISOString(),
      files: { "agent.mjs": tamper.badHash ? sha256("something else") : sha256(entry) },
      ...tamper.manifest,
    };
    writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
    const files = ["manifest.json", "agent.mjs", ...(tamper.extraFile ? ["stowaway.sh"] : [])];
    const out = join(dir, "pkg.tar.gz");
    execFileSync("tar", ["-czf", out, "-C", dir, ...files]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
