import { randomUUID } from "node:crypto";
import { cloudProviders, type Db, firstRow, nodePools, one, projects, type Tx } from "@keelson/db";
import { and, asc, eq } from "drizzle-orm";
import type { SelectResultFields } from "drizzle-orm/query-builders/select.types";
import type { SelectedFields, SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Keelson } from "../../context.ts";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";

export type ProjectRow = typeof projects.$inferSelect;

export const DEFAULT_PROJECT_NAME = "default";
export const LOCAL_PROVIDER_NAME = "local";
export const LOCAL_NODE_POOL_NAME = "defaultPool";

/** Every project has the built-in `local` provider and its node pool (spec §2.3). */
async function seedLocalProvider(tx: Tx, projectId: string): Promise<void> {
  const providerId = randomUUID();
  await tx.insert(cloudProviders).values({ id: providerId, projectId, name: LOCAL_PROVIDER_NAME, type: "local" });
  await tx
    .insert(nodePools)
    .values({ id: randomUUID(), projectId, cloudProviderId: providerId, name: LOCAL_NODE_POOL_NAME });
}

/** Names appear in paths, logs and Keystone scopes: keep them short and unambiguous. */
export const PROJECT_NAME_PATTERN = "^[A-Za-z0-9._-]{1,64}$";
const projectNameRe = new RegExp(PROJECT_NAME_PATTERN);

export function validateProjectName(name: string): string {
  if (!projectNameRe.test(name)) {
    throw badRequest("name", "name must be 1 to 64 characters of letters, digits, '-', '_' or '.'");
  }
  return name;
}

export async function createProject(db: Db, name: string): Promise<ProjectRow> {
  validateProjectName(name);
  return db.transaction(async (tx) => {
    if (firstRow(await tx.select().from(projects).where(eq(projects.name, name)))) {
      throw conflict(`a project named "${name}" already exists`, "duplicate_name");
    }
    const row = one(await tx.insert(projects).values({ id: randomUUID(), name }).returning());
    await seedLocalProvider(tx, row.id);
    return row;
  });
}

export async function ensureDefaultProject(keelson: Pick<Keelson, "db">): Promise<ProjectRow> {
  const existing = firstRow(await keelson.db.select().from(projects).where(eq(projects.name, DEFAULT_PROJECT_NAME)));
  return existing ?? (await createProject(keelson.db, DEFAULT_PROJECT_NAME));
}

export async function defaultProjectId(db: Db): Promise<string | undefined> {
  return firstRow(await db.select({ id: projects.id }).from(projects).where(eq(projects.name, DEFAULT_PROJECT_NAME)))
    ?.id;
}

export async function listProjects(db: Db): Promise<ProjectRow[]> {
  return await db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name));
}

export async function getProject(db: Tx, id: string): Promise<ProjectRow> {
  const row = firstRow(await db.select().from(projects).where(eq(projects.id, id)));
  if (!row) throw notFound("project", id);
  return row;
}

export async function findProjectByName(db: Tx, name: string): Promise<ProjectRow | undefined> {
  return firstRow(await db.select().from(projects).where(eq(projects.name, name)));
}

/** The admin sees every project; any other token sees only the project it belongs to. */
export async function projectsVisibleTo(db: Db, identity: Identity): Promise<ProjectRow[]> {
  if (identity.kind === "admin") return listProjects(db);
  const own = firstRow(await db.select().from(projects).where(eq(projects.id, identity.projectId)));
  return own ? [own] : [];
}

/** A table of rows a project owns (tokens, users, join tokens): each has its id and its project's. */
type ProjectOwned = SQLiteTable & { id: SQLiteColumn; projectId: SQLiteColumn };

/** Inserts one row a project owns, with a new id, once the project is found (404 otherwise); the row stored. */
export async function insertProjectRow<T extends ProjectOwned>(
  db: Db,
  table: T,
  projectId: string,
  values: Omit<T["$inferInsert"], "id" | "projectId">,
): Promise<T["$inferSelect"]> {
  return db.transaction(async (tx) => {
    await getProject(tx, projectId);
    const row = { ...values, id: randomUUID(), projectId } as T["$inferInsert"];
    // drizzle's insert and row types of `table`; TypeScript cannot resolve them inside a generic function.
    return one(await tx.insert(table).values(row).returning()) as T["$inferSelect"];
  });
}

/** A project's rows of one table (the `columns` of each), oldest first; 404 for an unknown project. */
export async function listProjectRows<T extends SelectedFields>(
  db: Db,
  table: ProjectOwned & { createdAt: SQLiteColumn },
  projectId: string,
  columns: T,
): Promise<SelectResultFields<T>[]> {
  await getProject(db, projectId);
  const rows = await db
    .select(columns)
    .from(table)
    .where(eq(table.projectId, projectId))
    .orderBy(asc(table.createdAt), asc(table.id));
  // drizzle's row type for a selection; TypeScript cannot resolve it inside a generic function.
  return rows as SelectResultFields<T>[];
}

/**
 * Deletes one row a project owns, reached only through that project: an id of another project
 * answers 404 like an unknown one (`what` names the kind in that answer).
 */
export async function deleteProjectRow(
  db: Tx,
  table: ProjectOwned,
  projectId: string,
  id: string,
  what: string,
): Promise<void> {
  const deleted = await db
    .delete(table)
    .where(and(eq(table.id, id), eq(table.projectId, projectId)))
    .returning({ id: table.id });
  if (deleted.length === 0) throw notFound(what, id);
}
