import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Identity, IdentityResolver } from "../domain/identity/resolver.ts";
import { forbidden } from "./errors.ts";

/**
 * Who may call a route:
 * - `public`: no token (health, docs, the Keystone-style login, agent registration);
 * - `admin`: the admin token only;
 * - `token` (default): any valid token; a project in the path must be the caller's own.
 */
export type RouteAuth = "public" | "admin" | "token";

declare module "fastify" {
  interface FastifyContextConfig {
    auth?: RouteAuth;
  }
  interface FastifyRequest {
    identity: Identity | null;
  }
}

/** The spec spells the project path parameter two ways. */
const PROJECT_PARAMS = ["projectId", "project_uuid"] as const;

export function projectParam(request: FastifyRequest): string | undefined {
  const params = request.params as Record<string, string> | undefined;
  if (!params) return undefined;
  for (const name of PROJECT_PARAMS) if (params[name] !== undefined) return params[name];
  return undefined;
}

export function canSeeProject(identity: Identity | null, projectId: string): boolean {
  if (!identity) return false;
  return identity.kind === "admin" || identity.projectId === projectId;
}

export function installAuth(app: FastifyInstance, resolver: IdentityResolver): void {
  app.decorateRequest("identity", null);
  // The OpenAPI document says what this hook does: a public route needs no token.
  app.addHook("onRoute", (route) => {
    if (route.config?.auth === "public") route.schema = { ...route.schema, security: [] };
  });
  app.addHook("onRequest", async (request) => {
    // Unknown routes answer 404, not 403: there is nothing there to protect.
    if (request.is404) return;
    // The interactive docs are a plugin's routes, without our route config; they are public.
    if (request.routeOptions.url?.startsWith("/docs")) return;
    const auth = request.routeOptions.config?.auth ?? "token";
    if (auth === "public") return;
    const header = request.headers["x-auth-token"];
    const identity = await resolver.resolve(Array.isArray(header) ? header[0] : header);
    if (!identity) throw forbidden();
    if (auth === "admin" && identity.kind !== "admin") {
      throw forbidden("this endpoint needs the admin token");
    }
    const projectId = projectParam(request);
    if (projectId !== undefined && !canSeeProject(identity, projectId)) {
      throw forbidden("the token does not grant access to this project");
    }
    request.identity = identity;
  });
}

/** The caller's identity in a route that is not public. */
export function callerOf(request: FastifyRequest): Identity {
  if (!request.identity) throw forbidden();
  return request.identity;
}
