import { randomUUID } from "node:crypto";
import { clusterAccessTokens, type Db, firstRow, type Tx } from "@keelson/db";
import { and, eq, lte } from "drizzle-orm";
import { isExpired } from "../identity/rules.ts";
import { generateSecret, hashSecret } from "../identity/token-hash.ts";

/** Prefix of kubeconfig bearer tokens, so a leaked one is recognisable (secret scanners, logs). */
export const CLUSTER_TOKEN_PREFIX = "kct";

export interface IssuedAccessToken {
  token: string;
  expiresAt: Date;
}

/**
 * Mints the bearer token of a kubeconfig. Only its hash is stored. It expires after the
 * cluster's certExpiryHrs, like a certificate kubeconfig would: the spec's knob for "how long a
 * downloaded kubeconfig works" applies to both kinds of credential.
 */
export async function issueClusterAccessToken(
  db: Db,
  input: { projectId: string; clusterId: string; subject: string; validHours: number; now: Date },
): Promise<IssuedAccessToken> {
  const token = generateSecret(CLUSTER_TOKEN_PREFIX);
  const expiresAt = new Date(input.now.getTime() + input.validHours * 3_600_000);
  const nowIso = input.now.toISOString();
  await db.transaction(async (tx) => {
    // Housekeeping: every download adds a row, so expired ones of this cluster go here.
    await tx
      .delete(clusterAccessTokens)
      .where(and(eq(clusterAccessTokens.clusterId, input.clusterId), lte(clusterAccessTokens.expiresAt, nowIso)));
    await tx.insert(clusterAccessTokens).values({
      id: randomUUID(),
      projectId: input.projectId,
      clusterId: input.clusterId,
      subject: input.subject,
      tokenHash: hashSecret(token),
      expiresAt: expiresAt.toISOString(),
    });
  });
  return { token, expiresAt };
}

/**
 * For the node bouncer: the subject a kubeconfig bearer token was issued to, or null when the
 * token is unknown, expired, or belongs to another cluster.
 */
export async function verifyClusterAccessToken(
  db: Db,
  clusterId: string,
  token: string,
  now = new Date(),
): Promise<string | null> {
  if (!token.startsWith(`${CLUSTER_TOKEN_PREFIX}_`)) return null;
  const row = firstRow(
    await db
      .select({
        clusterId: clusterAccessTokens.clusterId,
        subject: clusterAccessTokens.subject,
        expiresAt: clusterAccessTokens.expiresAt,
      })
      .from(clusterAccessTokens)
      .where(eq(clusterAccessTokens.tokenHash, hashSecret(token))),
  );
  if (!row || row.clusterId !== clusterId) return null;
  if (isExpired(row.expiresAt, now)) return null;
  return row.subject;
}

/**
 * Revokes the kubeconfig bearer tokens issued to `subject` (a project token's or a user's id,
 * see subject.ts), which no foreign key ties to it: when the token is revoked or the user
 * deleted, the access it handed out must not live on for up to the cluster's certExpiryHrs.
 */
export async function revokeAccessTokensOf(tx: Tx, projectId: string, subject: string): Promise<void> {
  await tx
    .delete(clusterAccessTokens)
    .where(and(eq(clusterAccessTokens.projectId, projectId), eq(clusterAccessTokens.subject, subject)));
}
