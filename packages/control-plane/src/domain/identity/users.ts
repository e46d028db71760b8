import { randomUUID } from "node:crypto";
import { type Db, firstRow, one, type Tx, users } from "@keelson/db";
import { and, asc, eq } from "drizzle-orm";
import { badRequest, conflict } from "../../http/errors.ts";
import { revokeAccessTokensOf } from "../kubeconfig/access-tokens.ts";
import { deleteProjectRow, getProject } from "../projects/projects.ts";
import { hashPassword, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "./passwords.ts";
import { requireDisplayName } from "./rules.ts";

/** User names are often e-mail addresses (Keystone habit), so allow more than project names. */
export const USER_NAME_MAX_LENGTH = 255;

/** A user as the API shows it: never the password hash. */
export interface UserInfo {
  id: string;
  projectId: string;
  name: string;
  createdAt: string;
}

export type UserRow = typeof users.$inferSelect;

const publicColumns = {
  id: users.id,
  projectId: users.projectId,
  name: users.name,
  createdAt: users.createdAt,
};

function requirePassword(password: string): string {
  if (password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH) {
    throw badRequest("password", `password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters long`);
  }
  return password;
}

async function userNamed(db: Tx, projectId: string, name: string): Promise<UserRow | undefined> {
  return firstRow(
    await db
      .select()
      .from(users)
      .where(and(eq(users.projectId, projectId), eq(users.name, name))),
  );
}

function duplicateUser(name: string) {
  return conflict(`a user named "${name}" already exists in this project`, "duplicate_name");
}

export async function createUser(
  db: Db,
  projectId: string,
  input: { name: string; password: string },
): Promise<UserInfo> {
  const name = requireDisplayName("name", input.name, USER_NAME_MAX_LENGTH);
  const password = requirePassword(input.password);
  // Checked before the (deliberately slow) hash so an obvious conflict answers at once...
  await getProject(db, projectId);
  if (await userNamed(db, projectId, name)) throw duplicateUser(name);
  const passwordHash = await hashPassword(password);
  // ...and again inside the transaction, because another request may have won while we hashed.
  return db.transaction(async (tx) => {
    await getProject(tx, projectId);
    if (await userNamed(tx, projectId, name)) throw duplicateUser(name);
    return one(
      await tx.insert(users).values({ id: randomUUID(), projectId, name, passwordHash }).returning(publicColumns),
    );
  });
}

export async function listUsers(db: Db, projectId: string): Promise<UserInfo[]> {
  await getProject(db, projectId);
  return await db.select(publicColumns).from(users).where(eq(users.projectId, projectId)).orderBy(asc(users.name));
}

/**
 * Deleting a user ends its login sessions too (tokens.user_id cascades), and the kubeconfig
 * bearer tokens issued to it (subject = its id), which no foreign key ties to the user.
 */
export async function deleteUser(db: Db, projectId: string, userId: string): Promise<void> {
  await db.transaction(async (tx) => {
    await deleteProjectRow(tx, users, projectId, userId, "user");
    await revokeAccessTokensOf(tx, projectId, userId);
  });
}

/** For the login: the full row, hash included. Not for presenting. */
export async function findUserForLogin(
  db: Tx,
  projectId: string,
  by: { name?: string; id?: string },
): Promise<UserRow | undefined> {
  if (by.id !== undefined) {
    const row = firstRow(await db.select().from(users).where(eq(users.id, by.id)));
    // An id from another project must not log in to this one.
    return row && row.projectId === projectId && (by.name === undefined || row.name === by.name) ? row : undefined;
  }
  return by.name === undefined ? undefined : await userNamed(db, projectId, by.name);
}
