import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let file: string | undefined;

/**
 * KEELSON_SECRETS_KEY_FILE for the servers this process starts on PostgreSQL (required there,
 * README "Shared secrets"): one key (0600) for all of them, so replicas of one database agree;
 * made at first use and removed when the process exits.
 */
export function secretsKeyEnv(): { KEELSON_SECRETS_KEY_FILE: string } {
  if (!file) {
    const dir = mkdtempSync(join(tmpdir(), "keelson-secrets-key-"));
    const made = join(dir, "secrets.key");
    writeFileSync(made, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    file = made;
  }
  return { KEELSON_SECRETS_KEY_FILE: file };
}
