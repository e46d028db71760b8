/**
 * A user's or project token's one role in its project (issue 16). Each role includes the ones
 * below it: `reader` reads everything except what grants cluster access (kubeconfigs, web CLI
 * tokens); `member` also changes clusters, nodes, cloud providers and rollouts and takes cluster
 * access; `admin` also manages the project's users, tokens and join tokens and reads its audit
 * trail. The global admin token stands above every project role.
 */
export const PROJECT_ROLES = ["admin", "member", "reader"] as const;
export type ProjectRole = (typeof PROJECT_ROLES)[number];

/** A new user's or project token's role when the body names none: enough to work, not to administer. */
export const DEFAULT_ROLE: ProjectRole = "member";

const RANK: Record<ProjectRole, number> = { reader: 0, member: 1, admin: 2 };

export function roleIncludes(held: ProjectRole, needed: ProjectRole): boolean {
  return RANK[held] >= RANK[needed];
}

export function isProjectRole(value: unknown): value is ProjectRole {
  return typeof value === "string" && (PROJECT_ROLES as readonly string[]).includes(value);
}
