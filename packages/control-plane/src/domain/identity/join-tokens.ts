import { type Db, firstRow, joinTokens, type Tx } from "@keelson/db";
import { and, eq, isNull } from "drizzle-orm";
import { ApiError } from "../../http/errors.ts";
import { deleteProjectRow, insertProjectRow, listProjectRows } from "../projects/projects.ts";
import { addMinutes, isExpired, requireIntegerInRange } from "./rules.ts";
import { generateSecret, hashSecret } from "./token-hash.ts";

export const JOIN_TOKEN_DEFAULT_MINUTES = 60;
/** A week: long enough to image a batch of machines, short enough that a leaked token goes stale. */
export const JOIN_TOKEN_MAX_MINUTES = 7 * 24 * 60;

export interface IssuedJoinToken {
  id: string;
  /** The secret; shown once, stored only as a hash. */
  token: string;
  projectId: string;
  expiresAt: string;
  createdAt: string;
}

export interface JoinTokenInfo {
  id: string;
  projectId: string;
  expiresAt: string;
  usedAt: string | null;
  usedByNodeId: string | null;
  createdAt: string;
}

export type JoinTokenRejection = "unknown" | "used" | "expired";

/**
 * Why a registration's join token was refused. An ApiError (403, like any other bad credential)
 * so an HTTP route can let it through; the agent hub can switch on `reason` for its close code.
 */
export class JoinTokenRejected extends ApiError {
  constructor(readonly reason: JoinTokenRejection) {
    const messages: Record<JoinTokenRejection, string> = {
      unknown: "the join token is not valid",
      used: "the join token has already been used; ask for a new one",
      expired: "the join token has expired; ask for a new one",
    };
    super(403, `join_token_${reason}`, messages[reason]);
    this.name = "JoinTokenRejected";
  }
}

export async function createJoinToken(
  db: Db,
  projectId: string,
  /**
   * `externalClusterId`: minted for that external cluster's agent (its deployment YAML);
   * `clusterId`: the reusable token of an auto-deployed cluster's instances. Never from a request body.
   */
  input: { expiresInMinutes?: number; externalClusterId?: string; clusterId?: string },
  now = new Date(),
): Promise<IssuedJoinToken> {
  const minutes = requireIntegerInRange(
    "expiresInMinutes",
    input.expiresInMinutes ?? JOIN_TOKEN_DEFAULT_MINUTES,
    1,
    JOIN_TOKEN_MAX_MINUTES,
  );
  const token = generateSecret("kjt");
  const row = await insertProjectRow(db, joinTokens, projectId, {
    tokenHash: hashSecret(token),
    expiresAt: addMinutes(now, minutes),
    externalClusterId: input.externalClusterId ?? null,
    clusterId: input.clusterId ?? null,
    createdAt: now.toISOString(),
  });
  return { id: row.id, token, projectId, expiresAt: row.expiresAt, createdAt: row.createdAt };
}

export async function listJoinTokens(db: Db, projectId: string): Promise<JoinTokenInfo[]> {
  return await listProjectRows(db, joinTokens, projectId, {
    id: joinTokens.id,
    projectId: joinTokens.projectId,
    expiresAt: joinTokens.expiresAt,
    usedAt: joinTokens.usedAt,
    usedByNodeId: joinTokens.usedByNodeId,
    createdAt: joinTokens.createdAt,
  });
}

export async function revokeJoinToken(db: Db, projectId: string, joinTokenId: string): Promise<void> {
  await deleteProjectRow(db, joinTokens, projectId, joinTokenId, "join token");
}

/** Who spent a join token, if anyone (the token itself, not its hash, is given). */
export async function joinTokenUse(tx: Tx, token: string): Promise<{ nodeId: string | null } | undefined> {
  const row = firstRow(
    await tx
      .select({ usedAt: joinTokens.usedAt, usedByNodeId: joinTokens.usedByNodeId })
      .from(joinTokens)
      .where(eq(joinTokens.tokenHash, hashSecret(token))),
  );
  return row?.usedAt ? { nodeId: row.usedByNodeId } : undefined;
}

/** What a registration's join token grants: the project, and for a cluster's token that cluster. */
export interface JoinTokenGrant {
  projectId: string;
  clusterId: string | null;
}

/**
 * Uses a join token for the registration of `nodeId`: a cluster's token (an auto deploy's, one
 * for all its instances) is checked for expiry and stays valid; any other is spent
 * (consumeJoinToken).
 */
export async function useJoinToken(tx: Tx, token: string, nodeId: string, now = new Date()): Promise<JoinTokenGrant> {
  const row = firstRow(
    await tx
      .select({ projectId: joinTokens.projectId, clusterId: joinTokens.clusterId, expiresAt: joinTokens.expiresAt })
      .from(joinTokens)
      .where(eq(joinTokens.tokenHash, hashSecret(token))),
  );
  if (row?.clusterId) {
    if (isExpired(row.expiresAt, now)) throw new JoinTokenRejected("expired");
    return { projectId: row.projectId, clusterId: row.clusterId };
  }
  return { projectId: await consumeJoinToken(tx, token, nodeId, now), clusterId: null };
}

/** When a cluster's instance token expires (undefined: not one, or revoked). */
export async function clusterTokenExpiry(db: Db, token: string): Promise<string | undefined> {
  const row = firstRow(
    await db
      .select({ expiresAt: joinTokens.expiresAt, clusterId: joinTokens.clusterId })
      .from(joinTokens)
      .where(eq(joinTokens.tokenHash, hashSecret(token))),
  );
  return row?.clusterId ? row.expiresAt : undefined;
}

/** Revokes a cluster's instance token (at the cluster's delete, before its row goes). */
export async function revokeClusterJoinTokens(db: Tx, clusterId: string): Promise<void> {
  await db.delete(joinTokens).where(eq(joinTokens.clusterId, clusterId));
}

/**
 * Spends a join token for the registration of `nodeId` and returns the project it joins.
 * Call inside the transaction that creates the node, so a failed registration does not burn the
 * token and two registrations racing for one token cannot both succeed: the spend is a
 * conditional update, which on PostgreSQL makes the second wait for the first and then find
 * the token used.
 */
export async function consumeJoinToken(tx: Tx, token: string, nodeId: string, now = new Date()): Promise<string> {
  const row = firstRow(
    await tx
      .select()
      .from(joinTokens)
      .where(eq(joinTokens.tokenHash, hashSecret(token))),
  );
  if (!row) throw new JoinTokenRejected("unknown");
  if (row.usedAt !== null) throw new JoinTokenRejected("used");
  if (isExpired(row.expiresAt, now)) throw new JoinTokenRejected("expired");
  const result = await tx
    .update(joinTokens)
    .set({ usedAt: now.toISOString(), usedByNodeId: nodeId })
    .where(and(eq(joinTokens.id, row.id), isNull(joinTokens.usedAt)))
    .returning({ id: joinTokens.id });
  if (result.length !== 1) throw new JoinTokenRejected("used");
  return row.projectId;
}
