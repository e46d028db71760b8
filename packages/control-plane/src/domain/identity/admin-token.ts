import { join } from "node:path";
import { readOrCreateSecretFile } from "../../secrets/secret-file.ts";
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
