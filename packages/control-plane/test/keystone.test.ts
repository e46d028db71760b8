import { firstRow, tokens } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOGIN_FAILED } from "../src/domain/identity/keystone.ts";
import { hashSecret } from "../src/domain/identity/token-hash.ts";
import { readServerSettings, type ServerSettings } from "../src/settings.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const HOUR = 3_600_000;
const LOGIN = "/keystone/v3/auth/tokens";

/** The body existing clients send, byte for byte in shape. */
function authBody(user: string, password: string, project: string, domain = "default") {
  return {
    auth: {
      identity: {
        methods: ["password"],
        password: { user: { name: user, password, domain: { id: domain } } },
      },
      scope: { project: { name: project, domain: { id: domain } } },
    },
  };
}

describe("Keystone-style login", () => {
  let t: TestApp;
  let userId: string;
  const login = (payload: unknown, url = LOGIN) =>
    t.request({ method: "POST", url, token: null, payload: payload as object });

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    const created = await t.request({
      method: "POST",
      url: `/v1/projects/${t.projectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "alice", password: "wonderland-1" },
    });
    expect(created.statusCode).toBe(201);
    userId = created.json().id;
    // A user of the same name in the other project, with another password.
    await t.request({
      method: "POST",
      url: `/v1/projects/${t.otherProjectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "bob", password: "builder-pass" },
    });
  });
  afterAll(async () => t.close());

  it("answers 201 with the token in X-Subject-Token and the Keystone token body", async () => {
    const before = Date.now();
    const res = await login(authBody("alice", "wonderland-1", "default"));
    expect(res.statusCode).toBe(201);
    const token = res.headers["x-subject-token"];
    expect(token).toMatch(/^kst_/);
    const body = res.json().token;
    expect(body).toEqual({
      methods: ["password"],
      expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
      issued_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
      audit_ids: [expect.any(String)],
      user: { id: userId, name: "alice", domain: { id: "default", name: "Default" } },
      project: { id: t.projectId, name: "default", domain: { id: "default", name: "Default" } },
      roles: [{ id: "member", name: "member" }],
      catalog: [],
    });
    // Default lifetime: 24 hours from issue.
    const expires = Date.parse(body.expires_at);
    expect(expires - Date.parse(body.issued_at)).toBe(24 * HOUR);
    expect(expires).toBeGreaterThanOrEqual(before + 24 * HOUR - 1);
    expect(expires).toBeLessThanOrEqual(Date.now() + 24 * HOUR);

    // Stored as a hashed session token of the user.
    const row = firstRow(
      await t.db
        .select()
        .from(tokens)
        .where(eq(tokens.tokenHash, hashSecret(token as string))),
    );
    expect(row).toMatchObject({ kind: "session", userId, projectId: t.projectId });
    expect(JSON.stringify(await t.db.select().from(tokens))).not.toContain(token as string);
  });

  it("issues a token that works as X-Auth-Token, plain and under /qbert, for its project only", async () => {
    const token = (await login(authBody("alice", "wonderland-1", "default"))).headers["x-subject-token"] as string;
    for (const url of ["/v1/projects", "/qbert/v1/projects"]) {
      const res = await t.request({ method: "GET", url, token });
      expect(res.statusCode).toBe(200);
      expect(res.json().projects).toEqual([expect.objectContaining({ id: t.projectId, name: "default" })]);
    }
    expect((await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters`, token })).statusCode).toBe(200);
    // alice is a member (the default role): join tokens are the project admin's.
    const refused = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, token });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({
      code: "forbidden",
      message: "this endpoint needs the admin role in the project; the caller's role is member",
    });
    expect((await t.request({ method: "GET", url: `/v1/projects/${t.otherProjectId}`, token })).statusCode).toBe(403);
    // A user's session is not the admin.
    expect(
      (await t.request({ method: "POST", url: "/v1/projects", token, payload: { name: "sneaky" } })).statusCode,
    ).toBe(403);
  });

  it("is served under /qbert and takes ?nocatalog, any domain, and ids instead of names", async () => {
    const viaQbert = await login(
      authBody("alice", "wonderland-1", "default", "some-domain"),
      `/qbert${LOGIN}?nocatalog`,
    );
    expect(viaQbert.statusCode).toBe(201);
    expect(viaQbert.json().token.project.domain.id).toBe("default");

    const byIds = await login({
      auth: {
        identity: { methods: ["password"], password: { user: { id: userId, password: "wonderland-1" } } },
        scope: { project: { id: t.projectId } },
      },
    });
    expect(byIds.statusCode).toBe(201);
    expect(byIds.json().token.user.name).toBe("alice");
  });

  describe("401 with one message for every bad credential", () => {
    it.each([
      ["a wrong password", authBody("alice", "wonderland-2", "default")],
      ["an unknown user", authBody("nobody", "wonderland-1", "default")],
      ["an unknown project", authBody("alice", "wonderland-1", "nowhere")],
      ["a user of another project", authBody("bob", "builder-pass", "default")],
      [
        "an unknown user id",
        {
          auth: {
            identity: { methods: ["password"], password: { user: { id: "x", password: "wonderland-1" } } },
            scope: { project: { name: "default" } },
          },
        },
      ],
    ])("%s", async (_what, payload) => {
      const before = (await t.db.select().from(tokens)).length;
      const res = await login(payload);
      expect(res.statusCode).toBe(401);
      expect(res.headers["content-type"]).toMatch(/application\/json/);
      expect(res.headers["x-subject-token"]).toBeUndefined();
      expect(res.json()).toEqual({ code: "unauthorized", message: LOGIN_FAILED });
      expect((await t.db.select().from(tokens)).length).toBe(before);
    });

    it("logs the other project's user in to its own project only, by name or by id", async () => {
      const res = await login(authBody("bob", "builder-pass", "other"));
      expect(res.statusCode).toBe(201);
      expect(res.json().token.project.id).toBe(t.otherProjectId);
      const byId = (project: string) => ({
        auth: {
          identity: {
            methods: ["password"],
            password: { user: { id: res.json().token.user.id, password: "builder-pass" } },
          },
          scope: { project: { name: project } },
        },
      });
      expect((await login(byId("other"))).statusCode).toBe(201);
      const wrongProject = await login(byId("default"));
      expect(wrongProject.statusCode).toBe(401);
      expect(wrongProject.json().message).toBe(LOGIN_FAILED);
    });
  });

  describe("400 naming the field for a malformed body", () => {
    const base = authBody("alice", "wonderland-1", "default");
    it.each([
      ["no body", undefined, "body"],
      ["no auth", {}, "auth"],
      ["no identity", { auth: { scope: base.auth.scope } }, "auth.identity"],
      [
        "no methods",
        { auth: { ...base.auth, identity: { password: base.auth.identity.password } } },
        "auth.identity.methods",
      ],
      [
        "a method other than password",
        { auth: { ...base.auth, identity: { ...base.auth.identity, methods: ["token"] } } },
        "auth.identity.methods",
      ],
      [
        "no password section",
        { auth: { ...base.auth, identity: { methods: ["password"] } } },
        "auth.identity.password",
      ],
      [
        "no password",
        { auth: { ...base.auth, identity: { methods: ["password"], password: { user: { name: "alice" } } } } },
        "auth.identity.password.user.password",
      ],
      [
        "neither user name nor id",
        { auth: { ...base.auth, identity: { methods: ["password"], password: { user: { password: "x" } } } } },
        "auth.identity.password.user.name",
      ],
      ["no scope", { auth: { identity: base.auth.identity } }, "auth.scope.project"],
      ["a scope without a project name", { auth: { ...base.auth, scope: { project: {} } } }, "auth.scope.project.name"],
    ])("%s", async (_what, payload, field) => {
      const res = await login(payload);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ field });
      expect(res.json().message).toContain(field === "body" ? "body" : field.split(".").pop());
    });
  });

  it("refuses an expired session with 403", async () => {
    const token = (await login(authBody("alice", "wonderland-1", "default"))).headers["x-subject-token"] as string;
    expect((await t.request({ method: "GET", url: "/v1/projects", token })).statusCode).toBe(200);
    await t.db
      .update(tokens)
      .set({ expiresAt: new Date(Date.now() - 1000).toISOString() })
      .where(eq(tokens.tokenHash, hashSecret(token)));
    const res = await t.request({ method: "GET", url: "/v1/projects", token });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe("forbidden");
    const validate = await t.request({
      method: "GET",
      url: LOGIN,
      token: ADMIN_TOKEN,
      headers: { "x-subject-token": token },
    });
    expect(validate.statusCode).toBe(404);
  });

  it("clears the user's expired sessions at the next login", async () => {
    const expiredSessions = async () =>
      (
        await t.db
          .select()
          .from(tokens)
          .where(and(eq(tokens.userId, userId), eq(tokens.kind, "session")))
      ).filter((row) => Date.parse(row.expiresAt as string) <= Date.now());
    expect((await expiredSessions()).length).toBeGreaterThan(0); // left by the previous test
    expect((await login(authBody("alice", "wonderland-1", "default"))).statusCode).toBe(201);
    expect(await expiredSessions()).toEqual([]);
  });

  describe("validation and revocation (GET/DELETE with X-Subject-Token)", () => {
    let subject: string;
    let issued: { token: Record<string, unknown> };
    beforeAll(async () => {
      const res = await login(authBody("alice", "wonderland-1", "default"));
      subject = res.headers["x-subject-token"] as string;
      issued = res.json();
    });

    it("describes a live session to its own project's token and to the admin", async () => {
      for (const token of [subject, t.token, ADMIN_TOKEN]) {
        const res = await t.request({ method: "GET", url: LOGIN, token, headers: { "x-subject-token": subject } });
        expect(res.statusCode).toBe(200);
        expect(res.headers["x-subject-token"]).toBe(subject);
        expect(res.json()).toEqual(issued);
      }
    });

    it("answers 404 to another project and for an unknown or non-session token, 403 without X-Auth-Token", async () => {
      const asOther = await t.request({
        method: "GET",
        url: LOGIN,
        token: t.otherToken,
        headers: { "x-subject-token": subject },
      });
      expect(asOther.statusCode).toBe(404);
      for (const unknown of ["kst_nope", t.token]) {
        const res = await t.request({
          method: "GET",
          url: LOGIN,
          token: ADMIN_TOKEN,
          headers: { "x-subject-token": unknown },
        });
        expect(res.statusCode).toBe(404);
      }
      const anonymous = await t.request({
        method: "GET",
        url: LOGIN,
        token: null,
        headers: { "x-subject-token": subject },
      });
      expect(anonymous.statusCode).toBe(403);
      const noSubject = await t.request({ method: "GET", url: LOGIN, token: ADMIN_TOKEN });
      expect(noSubject.statusCode).toBe(400);
      expect(noSubject.json().field).toBe("x-subject-token");
    });

    it("revokes a session: 204, then the token no longer works", async () => {
      const asOther = await t.request({
        method: "DELETE",
        url: LOGIN,
        token: t.otherToken,
        headers: { "x-subject-token": subject },
      });
      expect(asOther.statusCode).toBe(404);
      const res = await t.request({
        method: "DELETE",
        url: LOGIN,
        token: subject,
        headers: { "x-subject-token": subject },
      });
      expect(res.statusCode).toBe(204);
      expect((await t.request({ method: "GET", url: "/v1/projects", token: subject })).statusCode).toBe(403);
    });
  });

  it("ends a user's sessions when the user is deleted", async () => {
    await t.request({
      method: "POST",
      url: `/v1/projects/${t.projectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "temp", password: "temporary-1" },
    });
    const res = await login(authBody("temp", "temporary-1", "default"));
    const token = res.headers["x-subject-token"] as string;
    const tempId = res.json().token.user.id;
    expect((await t.request({ method: "GET", url: "/v1/projects", token })).statusCode).toBe(200);
    const del = await t.request({
      method: "DELETE",
      url: `/v1/projects/${t.projectId}/users/${tempId}`,
      token: ADMIN_TOKEN,
    });
    expect(del.statusCode).toBe(200);
    expect((await t.request({ method: "GET", url: "/v1/projects", token })).statusCode).toBe(403);
    expect((await login(authBody("temp", "temporary-1", "default"))).statusCode).toBe(401);
  });
});

describe("KEELSON_SESSION_TTL_HOURS", () => {
  it("sets the session lifetime", async () => {
    const t = await createTestApp({ runOperations: false, settings: { sessionTtlHours: 2 } });
    await t.request({
      method: "POST",
      url: `/v1/projects/${t.projectId}/users`,
      token: ADMIN_TOKEN,
      payload: { name: "carol", password: "short-lived" },
    });
    const res = await t.request({
      method: "POST",
      url: LOGIN,
      token: null,
      payload: authBody("carol", "short-lived", "default"),
    });
    expect(res.statusCode).toBe(201);
    const { issued_at, expires_at } = res.json().token;
    expect(Date.parse(expires_at) - Date.parse(issued_at)).toBe(2 * HOUR);
  });

  it("accepts positive hours and refuses anything else", () => {
    const ttl = (value?: string) => readServerSettings({ KEELSON_SESSION_TTL_HOURS: value }).sessionTtlHours;
    expect(ttl()).toBe(24);
    expect(ttl("0.5")).toBe(0.5);
    for (const bad of ["forever", "0", "-3", "8761", "Infinity"]) {
      expect(() => ttl(bad)).toThrow(/KEELSON_SESSION_TTL_HOURS/);
    }
  });
});

describe("Keystone login throttle", () => {
  /** A fresh app (the throttle is per app) with these users, each with password `<name>-password`; its project's name. */
  async function appWithUsers(
    names: string[],
    settings: Partial<ServerSettings> = {},
  ): Promise<{ t: TestApp; project: string }> {
    const t = await createTestApp({ runOperations: false, settings });
    const project = (await t.request({ method: "GET", url: `/v1/projects/${t.projectId}`, token: ADMIN_TOKEN })).json()
      .name as string;
    for (const name of names) {
      const created = await t.request({
        method: "POST",
        url: `/v1/projects/${t.projectId}/users`,
        token: ADMIN_TOKEN,
        payload: { name, password: `${name}-password` },
      });
      expect(created.statusCode).toBe(201);
    }
    return { t, project };
  }

  it("after 10 failures of one user from one address: 429 with Retry-After, even with the right password; other users still log in", async () => {
    const { t, project } = await appWithUsers(["carol", "dave"]);
    const login = (user: string, password: string) =>
      t.request({ method: "POST", url: LOGIN, token: null, payload: authBody(user, password, project) });

    // A success clears the user's count: nine failures, a success, nine more still pass through.
    for (let i = 0; i < 9; i++) expect((await login("carol", "wrong")).statusCode).toBe(401);
    expect((await login("carol", "carol-password")).statusCode).toBe(201);
    for (let i = 0; i < 10; i++) expect((await login("carol", "wrong")).statusCode).toBe(401);
    const blocked = await login("carol", "carol-password");
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json()).toMatchObject({ code: "too_many_attempts" });
    expect(Number(blocked.headers["retry-after"])).toBeGreaterThan(0);
    expect(Number(blocked.headers["retry-after"])).toBeLessThanOrEqual(300);
    expect(blocked.headers["x-subject-token"]).toBeUndefined();
    expect((await login("dave", "dave-password")).statusCode).toBe(201);
  });

  it("two replicas on one database share the budget: 5 failures on each, then both answer 429", async () => {
    const { t, project } = await appWithUsers(["frank"], { replicaId: "cp-1" });
    const other = await createTestApp({ runOperations: false, dataDir: t.dataDir, settings: { replicaId: "cp-2" } });
    const login = (app: TestApp, password: string) =>
      app.request({ method: "POST", url: LOGIN, token: null, payload: authBody("frank", password, project) });
    for (let i = 0; i < 5; i++) {
      expect((await login(t, "wrong")).statusCode).toBe(401);
      expect((await login(other, "wrong")).statusCode).toBe(401);
    }
    expect((await login(t, "frank-password")).statusCode).toBe(429);
    expect((await login(other, "frank-password")).statusCode).toBe(429);
  });

  it("behind a trusted proxy (KEELSON_TRUST_PROXY) counts the client addresses of X-Forwarded-For, one by one", async () => {
    const { t, project } = await appWithUsers(["erin"], { trustProxy: "127.0.0.1" });
    const login = (password: string, client: string) =>
      t.request({
        method: "POST",
        url: LOGIN,
        token: null,
        headers: { "x-forwarded-for": client },
        payload: authBody("erin", password, project),
      });
    for (let i = 0; i < 10; i++) expect((await login("wrong", "203.0.113.9")).statusCode).toBe(401);
    expect((await login("erin-password", "203.0.113.9")).statusCode).toBe(429);
    expect((await login("erin-password", "203.0.113.10")).statusCode).toBe(201);
  });
});
