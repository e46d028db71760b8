import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROLES, type ProjectRole, roleIncludes } from "../src/domain/identity/roles.ts";
import type { RouteAuth } from "../src/http/auth.ts";
import { ADMIN_TOKEN, createTestApp, mintProjectToken, type TestApp } from "./helpers.ts";

/**
 * Every documented operation × every role × own and another project (issue 16). The operation
 * list is the app's own OpenAPI document, and a route without a declared role fails at
 * registration (http/auth.ts), so a new route cannot escape this matrix.
 *
 * Ids other than the project are random: an allowed caller gets whatever the route answers for
 * a missing thing or an empty body (404, 400, 409 …), never 403; a refused one gets the 403.
 */

interface Operation {
  method: string;
  path: string;
  role: RouteAuth;
  projectScoped: boolean;
}

type Caller = { name: string; token: string | null } & (
  | { kind: "none" }
  | { kind: "global" }
  | { kind: "project"; role: ProjectRole; own: boolean }
);

const PROJECT_PARAM = /\{(projectId|project_uuid)\}/;

function allowed(op: Operation, caller: Caller): boolean {
  if (op.role === "public") return true;
  if (caller.kind === "none") return false;
  if (caller.kind === "global") return true;
  if (op.role === "global-admin" || op.role === "scrape") return false;
  if (op.projectScoped && !caller.own) return false;
  return roleIncludes(caller.role, op.role);
}

/** A scrape route asks a caller with no token for one (401, as Prometheus expects); the rest answer 403. */
function refusal(op: Operation, caller: Caller): { status: number; code: string } {
  return op.role === "scrape" && caller.kind === "none"
    ? { status: 401, code: "unauthorized" }
    : { status: 403, code: "forbidden" };
}

function refusalMessage(op: Operation, caller: Caller): RegExp {
  if (op.role === "scrape") return caller.kind === "none" ? /send the scrape token/ : /needs the scrape token/;
  if (caller.kind === "none") return /X-Auth-Token/;
  if (op.role === "global-admin") return /needs the global admin token/;
  if (caller.kind === "project" && op.projectScoped && !caller.own) return /does not grant access to this project/;
  return new RegExp(`needs the ${op.role} role in the project; the caller's role is \\w+`);
}

describe("the role matrix", () => {
  let t: TestApp;
  let operations: Operation[];
  const callers: Caller[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
    operations = Object.entries(doc.paths as Record<string, Record<string, { "x-keelson-role"?: RouteAuth }>>).flatMap(
      ([path, methods]) =>
        Object.entries(methods).map(([method, op]) => ({
          method: method.toUpperCase(),
          path,
          role: op["x-keelson-role"] as RouteAuth,
          projectScoped: PROJECT_PARAM.test(path),
        })),
    );
    callers.push({ name: "no token", token: null, kind: "none" });
    callers.push({ name: "global admin", token: ADMIN_TOKEN, kind: "global" });
    for (const role of PROJECT_ROLES) {
      callers.push({
        name: `own ${role}`,
        token: await mintProjectToken(t.db, t.projectId, role),
        kind: "project",
        role,
        own: true,
      });
      callers.push({
        name: `other project's ${role}`,
        token: await mintProjectToken(t.db, t.otherProjectId, role),
        kind: "project",
        role,
        own: false,
      });
    }
  });
  afterAll(async () => t.close());

  /** An event stream never ends by itself: its status and first bytes, over a real socket, then hang up. */
  let base: string | undefined;
  async function streamStart(url: string, token: string | null) {
    base ??= await t.app.listen({ host: "127.0.0.1", port: 0 });
    const abort = new AbortController();
    const res = await fetch(`${base}${url}`, {
      headers: token ? { "x-auth-token": token } : {},
      signal: abort.signal,
    });
    const body = res.status === 200 ? "(stream)" : await res.text();
    abort.abort();
    return { statusCode: res.status, body, json: () => JSON.parse(body) };
  }

  it("covers every operation of the document, each with a declared role", () => {
    expect(operations.length).toBeGreaterThan(90);
    const roles = new Set(["public", "global-admin", "scrape", ...PROJECT_ROLES]);
    for (const op of operations) expect(roles.has(op.role), `${op.method} ${op.path}: ${op.role}`).toBe(true);
    // The spec's examples of each room.
    const roleOf = (method: string, path: string) =>
      operations.find((o) => o.method === method && o.path === path)?.role;
    expect(roleOf("GET", "/v4/{project_uuid}/kubeconfig/{cluster_uuid}")).toBe("member");
    expect(roleOf("POST", "/v4/{project_uuid}/webcli/{uuid}")).toBe("member");
    expect(roleOf("GET", "/v4/{project_uuid}/clusters")).toBe("reader");
    expect(roleOf("POST", "/v4/{projectId}/clusters")).toBe("member");
    expect(roleOf("POST", "/v1/projects/{projectId}/users")).toBe("admin");
    expect(roleOf("POST", "/v1/projects/{projectId}/joinTokens")).toBe("admin");
    expect(roleOf("POST", "/v1/projects")).toBe("global-admin");
    expect(roleOf("GET", "/metrics")).toBe("scrape");
  });

  it("lets each caller do exactly what its role allows, in its own project only", { timeout: 120_000 }, async () => {
    const failures: string[] = [];
    let checked = 0;
    for (const op of operations) {
      const url = op.path
        .replace(PROJECT_PARAM, t.projectId)
        .replace("{version}", "9.9.9")
        .replace(/\{[^}]+\}/g, () => randomUUID());
      for (const caller of callers) {
        const payload = op.method === "POST" || op.method === "PUT" ? {} : undefined;
        const res = op.path.endsWith("/events")
          ? await streamStart(url, caller.token)
          : await t.request({ method: op.method as "GET", url, token: caller.token, payload });
        checked++;
        const label = `${op.method} ${op.path} as ${caller.name} (${op.role}): ${res.statusCode} ${res.body.slice(0, 160)}`;
        if (allowed(op, caller)) {
          if (res.statusCode === 403 || res.statusCode >= 500) failures.push(`expected past the role check: ${label}`);
        } else if (res.statusCode !== refusal(op, caller).status) {
          failures.push(`expected ${refusal(op, caller).status}: ${label}`);
        } else {
          const body = res.json();
          if (body.code !== refusal(op, caller).code || !refusalMessage(op, caller).test(body.message)) {
            failures.push(`expected a 403 naming what is needed: ${label}`);
          }
        }
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBe(operations.length * callers.length);
  });
});
