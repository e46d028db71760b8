import { randomUUID } from "node:crypto";
import { type Db, firstRow, projects, tokens, users } from "@keelson/db";
import { and, eq, lte } from "drizzle-orm";
import { ApiError, badRequest } from "../../http/errors.ts";
import { findProjectByName } from "../projects/projects.ts";
import type { LoginThrottle } from "./login-throttle.ts";
import { verifyAgainstNothing, verifyPassword } from "./passwords.ts";
import type { ProjectRole } from "./roles.ts";
import { isExpired } from "./rules.ts";
import { generateSecret, hashSecret } from "./token-hash.ts";
import { findUserForLogin } from "./users.ts";

/**
 * The Keystone-style password login (`POST /keystone/v3/auth/tokens`) that existing clients of
 * this interface use to obtain an X-Auth-Token. Keelson has a single identity domain: any domain
 * id or name a client sends is accepted and the answer always names the domain `default`.
 */

export const KEYSTONE_DOMAIN = { id: "default", name: "Default" } as const;

/** One message for unknown project, unknown user and wrong password: it must not tell which. */
export const LOGIN_FAILED = "the user name, password or project is not valid";

export const unauthorized = (message = LOGIN_FAILED) => new ApiError(401, "unauthorized", message);

/** The request body as Keystone clients send it (extra members are ignored, as Keystone does). */
export interface KeystoneAuthRequest {
  auth: {
    identity: {
      methods: string[];
      password?: {
        user: { id?: string; name?: string; password: string; domain?: { id?: string; name?: string } };
      };
    };
    scope?: { project?: { id?: string; name?: string; domain?: { id?: string; name?: string } } };
  };
}

export interface Session {
  tokenId: string;
  issuedAt: string;
  expiresAt: string;
  user: { id: string; name: string };
  project: { id: string; name: string };
  /** The user's role in the project, as it is when the session is looked at. */
  role: ProjectRole;
}

interface Credentials {
  user: { id?: string; name?: string };
  password: string;
  project: { id?: string; name?: string };
}

/** The semantic checks the schema cannot express; each names the member it is about. */
/** Who a login is for, as the throttle counts it: the user's id or name within the project's. */
/**
 * A password login under the login throttle: an address past its limit gets 429 with
 * Retry-After (even with the right password), a 401 counts against the address, and a success
 * clears that user's count.
 */
export async function throttledLogin(
  db: Db,
  throttle: LoginThrottle,
  client: string,
  body: KeystoneAuthRequest,
  ttlHours: number,
): Promise<{ token: string; session: Session }> {
  const subject = loginSubject(body);
  const waitMs = await throttle.blockedFor(client, subject);
  if (waitMs > 0) {
    throw new ApiError(
      429,
      "too_many_attempts",
      "too many failed logins from this address; try again later",
      undefined,
      { "retry-after": String(Math.ceil(waitMs / 1000)) },
    );
  }
  try {
    const login = await passwordLogin(db, body, ttlHours);
    await throttle.succeeded(client, subject);
    return login;
  } catch (err) {
    if (err instanceof ApiError && err.statusCode === 401) await throttle.failed(client, subject);
    throw err;
  }
}

export function loginSubject(body: KeystoneAuthRequest): string {
  const user = body.auth.identity.password?.user;
  const project = body.auth.scope?.project;
  return `${project?.id ?? project?.name ?? ""}/${user?.id ?? user?.name ?? ""}`;
}

function credentialsOf(body: KeystoneAuthRequest): Credentials {
  const { identity, scope } = body.auth;
  if (!identity.methods.includes("password")) {
    throw badRequest("auth.identity.methods", 'auth.identity.methods must include "password" (the only method served)');
  }
  const password = identity.password;
  if (!password) {
    throw badRequest("auth.identity.password", "auth.identity.password is required for the password method");
  }
  const { user } = password;
  if (user.name === undefined && user.id === undefined) {
    throw badRequest("auth.identity.password.user.name", "auth.identity.password.user needs a name or an id");
  }
  const project = scope?.project;
  if (!project) {
    throw badRequest("auth.scope.project", "auth.scope.project is required: tokens are scoped to one project");
  }
  if (project.name === undefined && project.id === undefined) {
    throw badRequest("auth.scope.project.name", "auth.scope.project needs a name or an id");
  }
  return {
    user: { id: user.id, name: user.name },
    password: user.password,
    project: { id: project.id, name: project.name },
  };
}

async function findProject(db: Db, by: { id?: string; name?: string }) {
  if (by.id !== undefined) {
    const row = firstRow(await db.select().from(projects).where(eq(projects.id, by.id)));
    return row && (by.name === undefined || row.name === by.name) ? row : undefined;
  }
  return by.name === undefined ? undefined : await findProjectByName(db, by.name);
}

/** Checks the password and issues a session token; 401 (always the same message) when it fails. */
export async function passwordLogin(
  db: Db,
  body: KeystoneAuthRequest,
  ttlHours: number,
  now = new Date(),
): Promise<{ token: string; session: Session }> {
  const credentials = credentialsOf(body);
  const project = await findProject(db, credentials.project);
  const user = project ? await findUserForLogin(db, project.id, credentials.user) : undefined;
  const ok = user
    ? await verifyPassword(credentials.password, user.passwordHash)
    : await verifyAgainstNothing(credentials.password);
  if (!ok || !user || !project) throw unauthorized();

  const token = generateSecret("kst");
  const issuedAt = now.toISOString();
  const expiresAt = new Date(now.getTime() + ttlHours * 3_600_000).toISOString();
  const tokenId = randomUUID();
  const role = await db.transaction(async (tx) => {
    // The user may have been deleted (or given another role) while the password was being checked.
    const current = firstRow(await tx.select({ role: users.role }).from(users).where(eq(users.id, user.id)));
    if (!current) throw unauthorized();
    // Housekeeping: each login clears the user's dead sessions so they do not pile up.
    await tx
      .delete(tokens)
      .where(and(eq(tokens.userId, user.id), eq(tokens.kind, "session"), lte(tokens.expiresAt, issuedAt)));
    await tx.insert(tokens).values({
      id: tokenId,
      projectId: project.id,
      userId: user.id,
      kind: "session",
      name: `login ${user.name}`,
      // Informational: a session acts with its user's role as it is at each request (resolver.ts).
      role: current.role,
      tokenHash: hashSecret(token),
      expiresAt,
      createdAt: issuedAt,
    });
    return current.role;
  });
  return {
    token,
    session: {
      tokenId,
      issuedAt,
      expiresAt,
      user: { id: user.id, name: user.name },
      project: { id: project.id, name: project.name },
      role,
    },
  };
}

/** The live session a token stands for, or undefined (unknown, expired, or not a login session). */
export async function findSession(db: Db, token: string, now = new Date()): Promise<Session | undefined> {
  const row = firstRow(
    await db
      .select({
        tokenId: tokens.id,
        issuedAt: tokens.createdAt,
        expiresAt: tokens.expiresAt,
        userId: users.id,
        userName: users.name,
        role: users.role,
        projectId: projects.id,
        projectName: projects.name,
      })
      .from(tokens)
      .innerJoin(users, eq(users.id, tokens.userId))
      .innerJoin(projects, eq(projects.id, tokens.projectId))
      .where(and(eq(tokens.tokenHash, hashSecret(token)), eq(tokens.kind, "session"))),
  );
  if (!row || row.expiresAt === null || isExpired(row.expiresAt, now)) return undefined;
  return {
    tokenId: row.tokenId,
    issuedAt: row.issuedAt,
    expiresAt: row.expiresAt,
    user: { id: row.userId, name: row.userName },
    project: { id: row.projectId, name: row.projectName },
    role: row.role,
  };
}

export async function endSession(db: Db, tokenId: string): Promise<void> {
  await db.delete(tokens).where(and(eq(tokens.id, tokenId), eq(tokens.kind, "session")));
}
