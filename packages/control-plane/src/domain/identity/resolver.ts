import { type Db, prepare, tokens, users } from "@keelson/db";
import { eq, sql } from "drizzle-orm";
import type { ProjectRole } from "./roles.ts";
import { hashSecret, sameHash } from "./token-hash.ts";

export type Identity =
  | { kind: "admin" }
  | { kind: "project"; projectId: string; tokenId: string; userId: string | null; role: ProjectRole };

/** Resolves an X-Auth-Token to who is calling, or null when the token is unknown or expired. */
export class IdentityResolver {
  // Prepared once: this runs on every request.
  private readonly byHash;
  private adminHash: string;

  constructor(db: Db, adminHash: string) {
    this.adminHash = adminHash;
    this.byHash = prepare(
      db,
      "token_by_hash",
      db
        .select({
          id: tokens.id,
          projectId: tokens.projectId,
          userId: tokens.userId,
          expiresAt: tokens.expiresAt,
          tokenRole: tokens.role,
          userRole: users.role,
        })
        .from(tokens)
        .leftJoin(users, eq(users.id, tokens.userId))
        .where(eq(tokens.tokenHash, sql.placeholder("hash"))),
    );
  }

  /** After a rotation: the old admin token stops working at once. */
  replaceAdminHash(hash: string): void {
    this.adminHash = hash;
  }

  async resolve(token: string | undefined, now = new Date()): Promise<Identity | null> {
    if (!token) return null;
    const hash = hashSecret(token);
    if (sameHash(hash, this.adminHash)) return { kind: "admin" };
    const row = await this.byHash.get({ hash });
    if (!row) return null;
    if (row.expiresAt && Date.parse(row.expiresAt) <= now.getTime()) return null;
    // A login session acts with its user's role as it is now, not as it was at login.
    const role = row.userId ? row.userRole : row.tokenRole;
    if (!role) return null;
    return { kind: "project", projectId: row.projectId, tokenId: row.id, userId: row.userId, role };
  }
}
