import { type Db, prepare, tokens } from "@keelson/db";
import { eq, sql } from "drizzle-orm";
import { hashSecret, sameHash } from "./token-hash.ts";

export type Identity =
  | { kind: "admin" }
  | { kind: "project"; projectId: string; tokenId: string; userId: string | null };

/** Resolves an X-Auth-Token to who is calling, or null when the token is unknown or expired. */
export class IdentityResolver {
  // Prepared once: this runs on every request.
  private readonly byHash;

  constructor(
    db: Db,
    private readonly adminHash: string,
  ) {
    this.byHash = prepare(
      db,
      "token_by_hash",
      db
        .select({
          id: tokens.id,
          projectId: tokens.projectId,
          userId: tokens.userId,
          expiresAt: tokens.expiresAt,
        })
        .from(tokens)
        .where(eq(tokens.tokenHash, sql.placeholder("hash"))),
    );
  }

  async resolve(token: string | undefined, now = new Date()): Promise<Identity | null> {
    if (!token) return null;
    const hash = hashSecret(token);
    if (sameHash(hash, this.adminHash)) return { kind: "admin" };
    const row = await this.byHash.get({ hash });
    if (!row) return null;
    if (row.expiresAt && Date.parse(row.expiresAt) <= now.getTime()) return null;
    return { kind: "project", projectId: row.projectId, tokenId: row.id, userId: row.userId };
  }
}
