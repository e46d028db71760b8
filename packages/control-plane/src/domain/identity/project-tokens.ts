import { type Db, tokens } from "@keelson/db";
import { revokeAccessTokensOf } from "../kubeconfig/access-tokens.ts";
import { deleteProjectRow, insertProjectRow, listProjectRows } from "../projects/projects.ts";
import { DEFAULT_ROLE, type ProjectRole } from "./roles.ts";
import { addMinutes, requireDisplayName, requireIntegerInRange } from "./rules.ts";
import { generateSecret, hashSecret } from "./token-hash.ts";

export const TOKEN_NAME_MAX_LENGTH = 64;
/** Ten years: long-lived automation tokens are allowed, eternal ones are opt-in (no expiry). */
export const TOKEN_MAX_EXPIRES_IN_HOURS = 87_600;

/** A token as listed: never the secret, which exists only in the create response. */
export interface TokenInfo {
  id: string;
  projectId: string;
  kind: "project" | "session";
  role: ProjectRole;
  name: string | null;
  userId: string | null;
  expiresAt: string | null;
  createdAt: string;
}

export interface IssuedProjectToken {
  id: string;
  /** The secret; shown once, stored only as a hash. */
  token: string;
  projectId: string;
  role: ProjectRole;
  name: string | null;
  expiresAt: string | null;
  createdAt: string;
}

export interface ProjectTokenInput {
  name?: string;
  expiresInHours?: number;
  role?: ProjectRole;
}

export async function createProjectToken(
  db: Db,
  projectId: string,
  input: ProjectTokenInput,
  now = new Date(),
): Promise<IssuedProjectToken> {
  const name = input.name === undefined ? null : requireDisplayName("name", input.name, TOKEN_NAME_MAX_LENGTH);
  const expiresAt =
    input.expiresInHours === undefined
      ? null
      : addMinutes(
          now,
          60 * requireIntegerInRange("expiresInHours", input.expiresInHours, 1, TOKEN_MAX_EXPIRES_IN_HOURS),
        );
  const token = generateSecret("kpt");
  const row = await insertProjectRow(db, tokens, projectId, {
    kind: "project",
    role: input.role ?? DEFAULT_ROLE,
    name,
    tokenHash: hashSecret(token),
    expiresAt,
    createdAt: now.toISOString(),
  });
  return {
    id: row.id,
    token,
    projectId,
    role: row.role,
    name: row.name,
    expiresAt: row.expiresAt,
    createdAt: row.createdAt,
  };
}

/** Project tokens and login sessions of a project, oldest first. */
export async function listTokens(db: Db, projectId: string): Promise<TokenInfo[]> {
  return await listProjectRows(db, tokens, projectId, {
    id: tokens.id,
    projectId: tokens.projectId,
    kind: tokens.kind,
    role: tokens.role,
    name: tokens.name,
    userId: tokens.userId,
    expiresAt: tokens.expiresAt,
    createdAt: tokens.createdAt,
  });
}

/**
 * Revocation is deletion: the resolver then no longer finds the hash. The kubeconfig bearer
 * tokens the token minted (subject = its id, see kubeconfig/subject.ts) go with it, or a revoked
 * token would live on as cluster-admin access for up to the cluster's certExpiryHrs.
 */
export async function revokeToken(db: Db, projectId: string, tokenId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await deleteProjectRow(tx, tokens, projectId, tokenId, "token");
    await revokeAccessTokensOf(tx, projectId, tokenId);
  });
}
