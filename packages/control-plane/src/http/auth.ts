import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Identity, IdentityResolver } from "../domain/identity/resolver.ts";
import { type ProjectRole, roleIncludes } from "../domain/identity/roles.ts";
import { hashSecret, sameHash } from "../domain/identity/token-hash.ts";
import { ApiError, forbidden } from "./errors.ts";

/**
 * Who may call a route; every route declares it (a route without one fails at registration, so
 * none is open by accident):
 * - `public`: no token (health, docs, the Keystone-style login, agent registration, packages);
 * - `global-admin`: the admin token only;
 * - `scrape`: the admin token or the scrape token (KEELSON_METRICS_TOKEN_FILE), in X-Auth-Token
 *   or as `Authorization: Bearer`, which is what Prometheus sends; none at all is 401;
 * - a project role (`reader`, `member`, `admin`): a token of that role or above, or the admin
 *   token; a project in the path must be the caller's own.
 */
export type RouteAuth = "public" | "global-admin" | "scrape" | ProjectRole;

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

/** The sentence the OpenAPI document gives each operation about who may call it. */
export function roleSentence(auth: RouteAuth): string {
  if (auth === "public") return "Needs no token.";
  if (auth === "global-admin") return "Needs the global admin token.";
  if (auth === "scrape") return "Needs the global admin token or the scrape token (KEELSON_METRICS_TOKEN_FILE).";
  return `Needs the \`${auth}\` role in the project (or a role above it, or the global admin token).`;
}

/** The interactive docs are a plugin's routes, without our route config; they are public. */
const isDocs = (url: string) => url === "/docs" || url.startsWith("/docs/");

/** The token in X-Auth-Token, else in `Authorization: Bearer` (scrape routes only). */
function presentedToken(request: FastifyRequest): string | undefined {
  const header = request.headers["x-auth-token"];
  const token = Array.isArray(header) ? header[0] : header;
  if (token) return token;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "");
  return bearer?.[1];
}

export function installAuth(
  app: FastifyInstance,
  resolver: IdentityResolver,
  /** The scrape token, when KEELSON_METRICS_TOKEN_FILE names one. */
  scrapeToken?: string,
): void {
  const scrapeHash = scrapeToken ? hashSecret(scrapeToken) : undefined;
  const scrapeAuth = async (request: FastifyRequest) => {
    const token = presentedToken(request);
    if (!token) {
      throw new ApiError(
        401,
        "unauthorized",
        "send the scrape token or the admin token (Authorization: Bearer)",
        undefined,
        { "WWW-Authenticate": 'Bearer realm="keelson-metrics"' },
      );
    }
    if (scrapeHash && sameHash(hashSecret(token), scrapeHash)) return;
    const identity = await resolver.resolve(token);
    if (identity?.kind !== "admin") throw forbidden("this endpoint needs the scrape token or the global admin token");
    request.identity = identity;
  };
  app.decorateRequest("identity", null);
  app.addHook("onRoute", (route) => {
    if (isDocs(route.url)) return;
    const auth = route.config?.auth;
    if (auth === undefined) throw new Error(`${route.method} ${route.url} declares no role (config.auth)`);
    // The OpenAPI document says what the auth hook does: the role each operation needs.
    const schema = { ...route.schema, "x-keelson-role": auth } as NonNullable<typeof route.schema>;
    const description = (schema as { description?: string }).description;
    (schema as { description?: string }).description = description
      ? `${description}\n\n${roleSentence(auth)}`
      : roleSentence(auth);
    if (auth === "public") schema.security = [];
    route.schema = schema;
  });
  app.addHook("onRequest", async (request) => {
    // Unknown routes answer 404, not 403: there is nothing there to protect.
    if (request.is404) return;
    if (isDocs(request.routeOptions.url ?? "")) return;
    // Deny by default: a route that somehow has no role needs the global admin.
    const auth = request.routeOptions.config?.auth ?? "global-admin";
    if (auth === "public") return;
    if (auth === "scrape") return scrapeAuth(request);
    const header = request.headers["x-auth-token"];
    const identity = await resolver.resolve(Array.isArray(header) ? header[0] : header);
    if (!identity) throw forbidden();
    request.identity = identity;
    if (identity.kind === "admin") return;
    if (auth === "global-admin") throw forbidden("this endpoint needs the global admin token");
    const projectId = projectParam(request);
    if (projectId !== undefined && !canSeeProject(identity, projectId)) {
      throw forbidden("the token does not grant access to this project");
    }
    if (!roleIncludes(identity.role, auth)) {
      throw forbidden(`this endpoint needs the ${auth} role in the project; the caller's role is ${identity.role}`);
    }
  });
}

/** The caller's identity in a route that is not public. */
export function callerOf(request: FastifyRequest): Identity {
  if (!request.identity) throw forbidden();
  return request.identity;
}
