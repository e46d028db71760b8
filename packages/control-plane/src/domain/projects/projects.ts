import { randomUUID } from "node:crypto";
import { cloudProviders, type Db, nodePools, projects, type Tx } from "@keelson/db";
import { asc, eq } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";

export type ProjectRow = typeof projects.$inferSelect;

export const DEFAULT_PROJECT_NAME = "default";
export const LOCAL_PROVIDER_NAME = "local";
export const LOCAL_NODE_POOL_NAME = "defaultPool";

/** Every project has the built-in `local` provider and its node pool (spec §2.3). */
function seedLocalProvider(tx: Tx, projectId: string): void {
  const providerId = randomUUID();
  tx.insert(cloudProviders).values({ id: providerId, projectId, name: LOCAL_PROVIDER_NAME, type: "local" }).run();
  tx.insert(nodePools)
    .values({ id: randomUUID(), projectId, cloudProviderId: providerId, name: LOCAL_NODE_POOL_NAME })
    .run();
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

export function createProject(db: Db, name: string): ProjectRow {
  validateProjectName(name);
  return db.transaction((tx) => {
    if (tx.select().from(projects).where(eq(projects.name, name)).get()) {
      throw conflict(`a project named "${name}" already exists`, "duplicate_name");
    }
    const row = tx.insert(projects).values({ id: randomUUID(), name }).returning().get();
    seedLocalProvider(tx, row.id);
    return row;
  });
}

export function ensureDefaultProject(keelson: Pick<Keelson, "db">): ProjectRow {
  const existing = keelson.db.select().from(projects).where(eq(projects.name, DEFAULT_PROJECT_NAME)).get();
  return existing ?? createProject(keelson.db, DEFAULT_PROJECT_NAME);
}

export function defaultProjectId(db: Db): string | undefined {
  return db.select({ id: projects.id }).from(projects).where(eq(projects.name, DEFAULT_PROJECT_NAME)).get()?.id;
}

export function listProjects(db: Db): ProjectRow[] {
  return db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name)).all();
}

export function getProject(db: Tx, id: string): ProjectRow {
  const row = db.select().from(projects).where(eq(projects.id, id)).get();
  if (!row) throw notFound("project", id);
  return row;
}

export function findProjectByName(db: Tx, name: string): ProjectRow | undefined {
  return db.select().from(projects).where(eq(projects.name, name)).get();
}

/** The admin sees every project; any other token sees only the project it belongs to. */
export function projectsVisibleTo(db: Db, identity: Identity): ProjectRow[] {
  if (identity.kind === "admin") return listProjects(db);
  const own = db.select().from(projects).where(eq(projects.id, identity.projectId)).get();
  return own ? [own] : [];
}
