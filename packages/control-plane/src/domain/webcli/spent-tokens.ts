import { type Db, webcliSpentTokens } from "@keelson/db";
import { eq, lte } from "drizzle-orm";
import type { WebCliClaims } from "./tokens.ts";

/**
 * A web CLI token opens one session, whichever replica it reaches (README "Web CLI"): its id is
 * written to `webcli_spent_tokens` before the session is opened. The primary key makes the write
 * the test: of two replicas spending one token at once, one inserts the row and the other
 * inserts nothing. Rows are kept until the token's own expiry (after it the signature check
 * refuses the token anyway) and deleted by the next spend after that.
 */
export async function spendWebCliToken(db: Db, claims: WebCliClaims, now = new Date()): Promise<boolean> {
  // One transaction: no reader sees the expired rows gone but this id not yet written.
  return db.transaction(async (tx) => {
    await tx.delete(webcliSpentTokens).where(lte(webcliSpentTokens.expiresAt, now.toISOString()));
    const spent = await tx
      .insert(webcliSpentTokens)
      .values({ id: claims.jti, expiresAt: new Date(claims.exp * 1000).toISOString() })
      .onConflictDoNothing({ target: webcliSpentTokens.id })
      .returning({ id: webcliSpentTokens.id });
    return spent.length === 1;
  });
}

/** Gives a token back when its session did not open (see WebCliServer), so it can be used again. */
export async function releaseWebCliToken(db: Db, jti: string): Promise<void> {
  await db.delete(webcliSpentTokens).where(eq(webcliSpentTokens.id, jti));
}
