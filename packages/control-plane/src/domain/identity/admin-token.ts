import { join } from "node:path";
import { conflict } from "../../http/errors.ts";
import { readOrCreateSecretFile } from "../../secrets/secret-file.ts";
import { writeFileAtomic } from "../../storage/data-dir-files.ts";
import { generateSecret } from "./token-hash.ts";

export interface AdminTokenSource {
  token: string;
  /** Where the token is kept, or null when it came from KEELSON_ADMIN_TOKEN. */
  file: string | null;
}

/** KEELSON_ADMIN_TOKEN wins; otherwise the token is generated once and kept 0600 in the data dir. */
export function ensureAdminToken(dataDir: string, configured: string | undefined): AdminTokenSource {
  if (configured) return { token: configured, file: null };
  const file = join(dataDir, "admin-token");
  const token = readOrCreateSecretFile(file, () => `${generateSecret("kadm")}\n`).trim();
  if (!token) throw new Error(`${file} is empty: remove it to generate a new admin token, or set KEELSON_ADMIN_TOKEN`);
  return { token, file };
}

/**
 * A new admin token in place of the one in `file` (null: it came from KEELSON_ADMIN_TOKEN, which
 * only the operator can change). Written to a temporary file, synced, then renamed over the old
 * one, so a crash leaves either token whole, never neither; the caller then stops accepting the
 * old one.
 */
export function rotateAdminTokenFile(file: string | null): string {
  if (file === null) {
    throw conflict(
      "the admin token comes from KEELSON_ADMIN_TOKEN: set a new value there and restart",
      "admin_token_configured",
    );
  }
  const token = generateSecret("kadm");
  writeFileAtomic(file, `${token}\n`, 0o600);
  return token;
}
