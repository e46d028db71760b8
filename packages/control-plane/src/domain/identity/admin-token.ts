import { join } from "node:path";
import { conflict } from "../../http/errors.ts";
import { readOrCreateSecretFile } from "../../secrets/secret-file.ts";
import { writeFileAtomic } from "../../storage/data-dir-files.ts";
import { generateSecret } from "./token-hash.ts";

/** The data dir's admin-token file (SQLite: the token itself; PostgreSQL: a copy of the database's). */
export const ADMIN_TOKEN_FILE = "admin-token";

export interface AdminTokenSource {
  token: string;
  /** Where an operator reads the token, or null when it came from KEELSON_ADMIN_TOKEN. */
  file: string | null;
  /**
   * A new token in place of this one, written where it is kept (the caller then stops accepting
   * the old one); a 409 when it came from KEELSON_ADMIN_TOKEN, which only the operator can change.
   */
  rotate(): Promise<string>;
}

export function newAdminToken(): string {
  return generateSecret("kadm");
}

/** KEELSON_ADMIN_TOKEN: rotation is the operator's. */
export function configuredAdminToken(token: string): AdminTokenSource {
  return {
    token,
    file: null,
    rotate: async () => {
      throw conflict(
        "the admin token comes from KEELSON_ADMIN_TOKEN: set a new value there and restart",
        "admin_token_configured",
      );
    },
  };
}

/**
 * A token kept in `file` (0600). Rotation writes a temporary file, syncs it and renames it over
 * the old one, so a crash leaves either token whole, never neither.
 */
export function adminTokenInFile(token: string, file: string): AdminTokenSource {
  return {
    token,
    file,
    rotate: async () => {
      const next = newAdminToken();
      writeFileAtomic(file, `${next}\n`, 0o600);
      return next;
    },
  };
}

/** KEELSON_ADMIN_TOKEN wins; otherwise the token is generated once and kept 0600 in the data dir. */
export function ensureAdminToken(dataDir: string, configured: string | undefined): AdminTokenSource {
  if (configured) return configuredAdminToken(configured);
  const file = join(dataDir, ADMIN_TOKEN_FILE);
  const token = readOrCreateSecretFile(file, () => `${newAdminToken()}\n`).trim();
  if (!token) throw new Error(`${file} is empty: remove it to generate a new admin token, or set KEELSON_ADMIN_TOKEN`);
  return adminTokenInFile(token, file);
}
