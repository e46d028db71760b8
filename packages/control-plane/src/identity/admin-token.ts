import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateSecret } from "./tokens.ts";

export interface AdminTokenSource {
  token: string;
  /** Where the token is kept, or null when it came from KEELSON_ADMIN_TOKEN. */
  file: string | null;
}

/** KEELSON_ADMIN_TOKEN wins; otherwise the token is generated once and kept 0600 in the data dir. */
export function ensureAdminToken(dataDir: string, configured: string | undefined): AdminTokenSource {
  if (configured) return { token: configured, file: null };
  const file = join(dataDir, "admin-token");
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${generateSecret("kadm")}\n`, { mode: 0o600, flag: "wx" });
  }
  return { token: readFileSync(file, "utf8").trim(), file };
}
