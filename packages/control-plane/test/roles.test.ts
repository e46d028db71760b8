import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { IdentityResolver } from "../src/domain/identity/resolver.ts";
import { installAuth } from "../src/http/auth.ts";
import { ADMIN_TOKEN, createTestApp, mintProjectToken, type TestApp } from "./helpers.ts";

/** Project roles (issue 16): what each role may do, the login's roles, and what ends a session. */

const LOGIN = "/keystone/v3/auth/tokens";

function authBody(user: string, password: string, project = "default") {
  return {
    auth: {
      identity: { methods: ["password"], password: { user: { name: user, password, domain: { id: "default" } } } },
      scope: { project: { name: project, domain: { id: "default" } } },
    },
  };
}

describe("project roles", () => {
  let t: TestApp;
  const users = () => `/v1/projects/${t.projectId}/users`;
  const login = async (name: string, password: string) => {
    const res = await t.request({ method: "POST", url: LOGIN, token: null, payload: authBody(name, password) });
    expect(res.statusCode).toBe(201);
    return { token: res.headers["x-subject-token"] as string, roles: res.json().token.roles };
  };
  const createUser = async (name: string, role?: string) => {
    const res = await t.request({
      method: "POST",
      url: users(),
      payload: { name, password: `${name}-password`, ...(role ? { role } : {}) },
    });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; role: string };
  };

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
  });
  afterAll(async () => t.close());

  it("gives a new user member unless the body names a role, and the login lists the real role", async () => {
    expect((await createUser("mia")).role).toBe("member");
    expect((await createUser("rudi", "reader")).role).toBe("reader");
    expect((await createUser("ada", "admin")).role).toBe("admin");
    for (const [name, role] of [
      ["mia", "member"],
      ["rudi", "reader"],
      ["ada", "admin"],
    ]) {
      expect((await login(name as string, `${name}-password`)).roles).toEqual([{ id: role, name: role }]);
    }
  });

  it("lets a reader read but not take cluster access, nor change anything", async () => {
    const { token } = await login("rudi", "rudi-password");
    expect((await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters`, token })).statusCode).toBe(200);
    const kubeconfig = await t.request({ method: "GET", url: `/v4/${t.projectId}/kubeconfig/some-cluster`, token });
    expect(kubeconfig.statusCode).toBe(403);
    expect(kubeconfig.json()).toEqual({
      code: "forbidden",
      message: "this endpoint needs the member role in the project; the caller's role is reader",
    });
    const create = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, token, payload: {} });
    expect(create.statusCode).toBe(403);
  });

  it("ends a user's sessions when its role changes, and the next login carries the new role", async () => {
    const { token } = await login("mia", "mia-password");
    expect((await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters`, token })).statusCode).toBe(200);
    const mia = (await t.request({ method: "GET", url: users() }))
      .json()
      .users.find((u: { name: string }) => u.name === "mia");
    // A member may not change roles, not even its own.
    const self = await t.request({
      method: "PUT",
      url: `${users()}/${mia.id}/role`,
      token,
      payload: { role: "admin" },
    });
    expect(self.statusCode).toBe(403);
    const changed = await t.request({ method: "PUT", url: `${users()}/${mia.id}/role`, payload: { role: "reader" } });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ id: mia.id, name: "mia", role: "reader" });
    expect((await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters`, token })).statusCode).toBe(403);
    expect((await login("mia", "mia-password")).roles).toEqual([{ id: "reader", name: "reader" }]);

    const bad = await t.request({ method: "PUT", url: `${users()}/${mia.id}/role`, payload: { role: "owner" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().field).toBe("role");
    const elsewhere = await t.request({
      method: "PUT",
      url: `/v1/projects/${t.otherProjectId}/users/${mia.id}/role`,
      token: ADMIN_TOKEN,
      payload: { role: "admin" },
    });
    expect(elsewhere.statusCode).toBe(404);
  });

  it("ends a deleted user's sessions", async () => {
    const ada = await login("ada", "ada-password");
    expect((await t.request({ method: "GET", url: users(), token: ada.token })).statusCode).toBe(200);
    const adaId = (await t.request({ method: "GET", url: users() }))
      .json()
      .users.find((u: { name: string }) => u.name === "ada").id;
    expect((await t.request({ method: "DELETE", url: `${users()}/${adaId}` })).statusCode).toBe(200);
    expect((await t.request({ method: "GET", url: users(), token: ada.token })).statusCode).toBe(403);
  });

  it("mints project tokens as member unless the body names a role", async () => {
    const url = `/v1/projects/${t.projectId}/tokens`;
    const plain = (await t.request({ method: "POST", url, payload: {} })).json();
    const reader = (await t.request({ method: "POST", url, payload: { role: "reader" } })).json();
    expect([plain.role, reader.role]).toEqual(["member", "reader"]);
    expect((await t.request({ method: "POST", url, token: plain.token, payload: {} })).statusCode).toBe(403);
    expect((await t.request({ method: "GET", url: `/v4/${t.projectId}/nodes`, token: reader.token })).statusCode).toBe(
      200,
    );
  });

  it("lets a member end its own session but not another user's", async () => {
    await createUser("max");
    await createUser("moe");
    const max = await login("max", "max-password");
    const moe = await login("moe", "moe-password");
    const other = await t.request({
      method: "DELETE",
      url: LOGIN,
      token: max.token,
      headers: { "x-subject-token": moe.token },
    });
    expect(other.statusCode).toBe(403);
    const own = await t.request({
      method: "DELETE",
      url: LOGIN,
      token: max.token,
      headers: { "x-subject-token": max.token },
    });
    expect(own.statusCode).toBe(204);
    const byAdmin = await t.request({ method: "DELETE", url: LOGIN, headers: { "x-subject-token": moe.token } });
    expect(byAdmin.statusCode).toBe(204);
  });

  it("shows each operation's role in the OpenAPI document", async () => {
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
    const kubeconfig = doc.paths["/v4/{project_uuid}/kubeconfig/{cluster_uuid}"].get;
    expect(kubeconfig["x-keelson-role"]).toBe("member");
    expect(kubeconfig.description).toContain("Needs the `member` role in the project");
    expect(doc.paths["/v1/projects"].post["x-keelson-role"]).toBe("global-admin");
    expect(doc.paths["/healthz"].get["x-keelson-role"]).toBe("public");
  });
});

describe("rotating the admin token", () => {
  it("answers a new token once, writes it to the data dir and stops the old one at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-admin-"));
    const file = join(dir, "admin-token");
    writeFileSync(file, `${ADMIN_TOKEN}\n`, { mode: 0o600 });
    const t = await createTestApp({ runOperations: false, adminTokenFile: file });
    try {
      const member = await mintProjectToken(t.db, t.projectId, "member");
      expect((await t.request({ method: "POST", url: "/v1/adminToken/rotate", token: member })).statusCode).toBe(403);
      const res = await t.request({ method: "POST", url: "/v1/adminToken/rotate", token: ADMIN_TOKEN });
      expect(res.statusCode).toBe(201);
      const fresh = res.json().token as string;
      expect(fresh).toMatch(/^kadm_/);
      expect(readFileSync(file, "utf8")).toBe(`${fresh}\n`);
      expect((await t.request({ method: "GET", url: "/v1/projects", token: ADMIN_TOKEN })).statusCode).toBe(403);
      expect((await t.request({ method: "GET", url: "/v1/projects", token: fresh })).json().projects.length).toBe(2);
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses with 409 when the token comes from KEELSON_ADMIN_TOKEN", async () => {
    const t = await createTestApp({ runOperations: false });
    const res = await t.request({ method: "POST", url: "/v1/adminToken/rotate", token: ADMIN_TOKEN });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: "admin_token_configured" });
    expect((await t.request({ method: "GET", url: "/v1/projects", token: ADMIN_TOKEN })).statusCode).toBe(200);
  });
});

describe("deny by default", () => {
  it("refuses to start with a route that declares no role", async () => {
    const app = Fastify();
    // No request is made: the resolver is never asked.
    installAuth(app, { resolve: async () => null } as unknown as IdentityResolver);
    expect(() => app.get("/v1/forgotten", async () => ({ ok: true }))).toThrow(
      "GET /v1/forgotten declares no role (config.auth)",
    );
    await app.close();
  });
});
