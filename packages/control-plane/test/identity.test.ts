import { randomUUID } from "node:crypto";
import { cloudProviders, firstRow, joinTokens, nodePools, projects, tokens, users } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consumeJoinToken, JoinTokenRejected } from "../src/domain/identity/join-tokens.ts";
import { hashPassword, verifyPassword } from "../src/domain/identity/passwords.ts";
import { generateSecret, hashSecret } from "../src/domain/identity/token-hash.ts";
import { ADMIN_TOKEN, createTestApp, mintProjectToken, type TestApp } from "./helpers.ts";

const HOUR = 3_600_000;

function expectError(res: { statusCode: number; json(): unknown }, status: number, code?: string) {
  expect(res.statusCode).toBe(status);
  const body = res.json() as { code: string; message: string };
  expect(typeof body.message).toBe("string");
  if (code) expect(body.code).toBe(code);
  return body as { code: string; message: string; field?: string };
}

describe("password hashing", () => {
  it("stores a self-describing scrypt hash that verifies only the right password", async () => {
    const hash = await hashPassword("correct horse battery");
    expect(hash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
    expect(hash).not.toContain("correct horse");
    const [, , , , salt, key] = hash.split("$");
    expect(Buffer.from(salt as string, "base64")).toHaveLength(16);
    expect(Buffer.from(key as string, "base64")).toHaveLength(64);
    expect(await verifyPassword("correct horse battery", hash)).toBe(true);
    expect(await verifyPassword("correct horse batterY", hash)).toBe(false);
    expect(await verifyPassword("", hash)).toBe(false);
  });

  it("salts every hash", async () => {
    const [a, b] = await Promise.all([hashPassword("same password"), hashPassword("same password")]);
    expect(a).not.toBe(b);
  });

  it("never matches (nor throws on) a malformed or greedy stored hash", async () => {
    expect(await verifyPassword("x", "plaintext")).toBe(false);
    expect(await verifyPassword("x", "scrypt$1000$8$1$AAAA$AAAA")).toBe(false); // N not a power of two
    expect(await verifyPassword("x", `scrypt$${2 ** 30}$8$1$AAAA$AAAA`)).toBe(false); // asks for gigabytes
    expect(await verifyPassword("x", "scrypt$16384$8$1$$")).toBe(false);
  });

  it("does not block the event loop while hashing", async () => {
    let ranMeanwhile = false;
    setImmediate(() => {
      ranMeanwhile = true;
    });
    await hashPassword("another password");
    expect(ranMeanwhile).toBe(true);
  });
});

describe("identity endpoints", () => {
  let t: TestApp;
  const admin = ADMIN_TOKEN;
  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
  });
  afterAll(async () => t.close());

  const projectCount = async () => (await t.db.select().from(projects)).length;

  describe("projects", () => {
    it("lists every project for the admin and only its own for a project token", async () => {
      const all = await t.request({ method: "GET", url: "/v1/projects", token: admin });
      expect(all.statusCode).toBe(200);
      const names = all.json().projects.map((p: { name: string }) => p.name);
      expect(names).toEqual(expect.arrayContaining(["default", "other"]));
      for (const p of all.json().projects) expect(Object.keys(p).sort()).toEqual(["createdAt", "id", "name"]);

      const own = await t.request({ method: "GET", url: "/v1/projects" });
      expect(own.statusCode).toBe(200);
      expect(own.json().projects).toEqual([expect.objectContaining({ id: t.projectId, name: "default" })]);
    });

    it("answers 403 with a JSON body without a token or with an unknown one", async () => {
      expectError(await t.request({ method: "GET", url: "/v1/projects", token: null }), 403, "forbidden");
      expectError(await t.request({ method: "GET", url: "/v1/projects", token: "nope" }), 403, "forbidden");
      expectError(await t.request({ method: "GET", url: "/qbert/v1/projects", token: null }), 403, "forbidden");
    });

    it("creates a project with the local provider and its node pool", async () => {
      const res = await t.request({
        method: "POST",
        url: "/v1/projects",
        token: admin,
        payload: { name: "team-a.v2_x" },
      });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body).toEqual({ id: expect.any(String), name: "team-a.v2_x", createdAt: expect.any(String) });
      const providers = await t.db.select().from(cloudProviders).where(eq(cloudProviders.projectId, body.id));
      expect(providers).toEqual([expect.objectContaining({ name: "local", type: "local" })]);
      const pools = await t.db.select().from(nodePools).where(eq(nodePools.projectId, body.id));
      expect(pools).toHaveLength(1);
      expect(pools[0]?.cloudProviderId).toBe(providers[0]?.id);

      const get = await t.request({ method: "GET", url: `/v1/projects/${body.id}`, token: admin });
      expect(get.json()).toEqual(body);
    });

    it("refuses a duplicate name with 409", async () => {
      const before = await projectCount();
      expectError(
        await t.request({ method: "POST", url: "/v1/projects", token: admin, payload: { name: "default" } }),
        409,
        "duplicate_name",
      );
      expect(await projectCount()).toBe(before);
    });

    it.each([
      ["empty", { name: "" }],
      ["too long", { name: "a".repeat(65) }],
      ["a space", { name: "my project" }],
      ["a slash", { name: "a/b" }],
      ["not a string", { name: { x: 1 } }],
      ["missing", {}],
      ["an unknown field", { name: "fine", color: "red" }],
    ])("answers 400 naming the field for a name that is %s, storing nothing", async (_what, payload) => {
      const before = await projectCount();
      const body = expectError(await t.request({ method: "POST", url: "/v1/projects", token: admin, payload }), 400);
      expect(body.field).toMatch(/^(name|color)$/);
      expect(await projectCount()).toBe(before);
    });

    it("accepts a 64-character name", async () => {
      const res = await t.request({
        method: "POST",
        url: "/v1/projects",
        token: admin,
        payload: { name: "b".repeat(64) },
      });
      expect(res.statusCode).toBe(201);
    });

    it("is admin-only to create", async () => {
      expectError(await t.request({ method: "POST", url: "/v1/projects", payload: { name: "mine" } }), 403);
      expectError(
        await t.request({ method: "POST", url: "/v1/projects", token: null, payload: { name: "mine" } }),
        403,
      );
    });

    it("shows a project to its own token, 403 to another project's, 404 to the admin for an unknown id", async () => {
      expect((await t.request({ method: "GET", url: `/v1/projects/${t.projectId}` })).statusCode).toBe(200);
      expectError(await t.request({ method: "GET", url: `/v1/projects/${t.otherProjectId}` }), 403);
      expectError(
        await t.request({ method: "GET", url: `/v1/projects/${randomUUID()}`, token: admin }),
        404,
        "not_found",
      );
    });
  });

  describe("project tokens", () => {
    const url = () => `/v1/projects/${t.projectId}/tokens`;

    it("mints a token shown once, stored hashed, that works as X-Auth-Token", async () => {
      const before = Date.now();
      const res = await t.request({
        method: "POST",
        url: url(),
        token: admin,
        payload: { name: "ci", expiresInHours: 2 },
      });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body).toEqual({
        id: expect.any(String),
        token: expect.stringMatching(/^kpt_/),
        projectId: t.projectId,
        role: "member",
        name: "ci",
        expiresAt: expect.any(String),
        createdAt: expect.any(String),
      });
      const expires = Date.parse(body.expiresAt);
      expect(expires).toBeGreaterThanOrEqual(before + 2 * HOUR);
      expect(expires).toBeLessThanOrEqual(Date.now() + 2 * HOUR);

      const row = firstRow(await t.db.select().from(tokens).where(eq(tokens.id, body.id)));
      expect(row?.kind).toBe("project");
      expect(row?.tokenHash).toBe(hashSecret(body.token));
      expect(JSON.stringify(await t.db.select().from(tokens))).not.toContain(body.token);

      const use = await t.request({ method: "GET", url: "/v1/projects", token: body.token });
      expect(use.json().projects.map((p: { id: string }) => p.id)).toEqual([t.projectId]);
    });

    it("mints a token without a body: no name, no expiry", async () => {
      const res = await t.request({ method: "POST", url: url(), token: admin });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ name: null, expiresAt: null });
    });

    it.each([
      [{ expiresInHours: 0 }, "expiresInHours"],
      [{ expiresInHours: 87_601 }, "expiresInHours"],
      [{ expiresInHours: 1.5 }, "expiresInHours"],
      [{ name: "" }, "name"],
      [{ name: "x".repeat(65) }, "name"],
      [{ name: "tab\tname" }, "name"],
      [{ scope: "all" }, "scope"],
    ])("answers 400 for %j naming %s", async (payload, field) => {
      const before = (await t.db.select().from(tokens)).length;
      const body = expectError(await t.request({ method: "POST", url: url(), token: admin, payload }), 400);
      expect(body.field).toBe(field);
      expect((await t.db.select().from(tokens)).length).toBe(before);
    });

    it("needs the project admin role, and 404 for an unknown project", async () => {
      const member = await mintProjectToken(t.db, t.projectId, "member");
      expectError(await t.request({ method: "POST", url: url(), token: member, payload: {} }), 403);
      expectError(await t.request({ method: "POST", url: url(), token: t.otherToken, payload: {} }), 403);
      expectError(await t.request({ method: "POST", url: url(), token: null, payload: {} }), 403);
      expectError(await t.request({ method: "GET", url: url(), token: member }), 403);
      expect((await t.request({ method: "POST", url: url(), payload: { role: "reader" } })).json().role).toBe("reader");
      expectError(
        await t.request({ method: "POST", url: `/v1/projects/${randomUUID()}/tokens`, token: admin, payload: {} }),
        404,
      );
    });

    it("lists tokens without secrets and revokes one", async () => {
      const minted = (
        await t.request({ method: "POST", url: url(), token: admin, payload: { name: "short-lived" } })
      ).json();
      const list = await t.request({ method: "GET", url: url(), token: admin });
      expect(list.statusCode).toBe(200);
      const listed = list.json().tokens;
      const entry = listed.find((x: { id: string }) => x.id === minted.id);
      expect(entry).toEqual({
        id: minted.id,
        projectId: t.projectId,
        kind: "project",
        role: "member",
        name: "short-lived",
        userId: null,
        expiresAt: null,
        createdAt: expect.any(String),
      });
      expect(JSON.stringify(listed)).not.toMatch(/kpt_|tokenHash|token_hash/);

      // Another project's path does not reach this project's token.
      expectError(
        await t.request({
          method: "DELETE",
          url: `/v1/projects/${t.otherProjectId}/tokens/${minted.id}`,
          token: admin,
        }),
        404,
      );
      const del = await t.request({ method: "DELETE", url: `${url()}/${minted.id}`, token: admin });
      expect(del.statusCode).toBe(200);
      expect(del.body).toBe("");
      expectError(await t.request({ method: "GET", url: "/v1/projects", token: minted.token }), 403);
      expectError(await t.request({ method: "DELETE", url: `${url()}/${minted.id}`, token: admin }), 404);
      expectError(await t.request({ method: "DELETE", url: `${url()}/${minted.id}`, token: t.otherToken }), 403);
    });

    it("refuses an expired token with 403", async () => {
      const token = generateSecret("kpt");
      await t.db.insert(tokens).values({
        id: randomUUID(),
        projectId: t.projectId,
        kind: "project",
        tokenHash: hashSecret(token),
        expiresAt: new Date(Date.now() - 1000).toISOString(),
      });
      expectError(await t.request({ method: "GET", url: "/v1/projects", token }), 403, "forbidden");
    });
  });

  describe("users", () => {
    const url = () => `/v1/projects/${t.projectId}/users`;
    const userRows = async () => await t.db.select().from(users);

    it("creates a user and keeps only an scrypt hash of the password", async () => {
      const res = await t.request({
        method: "POST",
        url: url(),
        token: admin,
        payload: { name: "alice@example.com", password: "s3cret-password" },
      });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toEqual({
        id: expect.any(String),
        name: "alice@example.com",
        projectId: t.projectId,
        role: "member",
        createdAt: expect.any(String),
      });
      expect(res.body).not.toMatch(/s3cret|scrypt|password/i);
      const row = firstRow(await t.db.select().from(users).where(eq(users.id, res.json().id)));
      expect(row?.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/);
      expect(row?.passwordHash).not.toContain("s3cret-password");
      expect(await verifyPassword("s3cret-password", row?.passwordHash as string)).toBe(true);
    });

    it("refuses a duplicate name in the same project but allows it in another", async () => {
      const before = (await userRows()).length;
      expectError(
        await t.request({
          method: "POST",
          url: url(),
          token: admin,
          payload: { name: "alice@example.com", password: "another-password" },
        }),
        409,
        "duplicate_name",
      );
      expect((await userRows()).length).toBe(before);
      const elsewhere = await t.request({
        method: "POST",
        url: `/v1/projects/${t.otherProjectId}/users`,
        token: admin,
        payload: { name: "alice@example.com", password: "another-password" },
      });
      expect(elsewhere.statusCode).toBe(201);
    });

    it("answers 409 to one of two concurrent creations of the same name", async () => {
      const payload = { name: "racer", password: "racing-password" };
      const results = await Promise.all([
        t.request({ method: "POST", url: url(), token: admin, payload }),
        t.request({ method: "POST", url: url(), token: admin, payload }),
      ]);
      expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    });

    it.each([
      [{ name: "bob", password: "short" }, "password"],
      [{ name: "bob", password: "p".repeat(1025) }, "password"],
      [{ name: "bob" }, "password"],
      [{ name: "", password: "long-enough" }, "name"],
      [{ name: " bob", password: "long-enough" }, "name"],
      [{ name: "n".repeat(256), password: "long-enough" }, "name"],
      [{ name: "bob", password: "long-enough", role: "owner" }, "role"],
      [{ name: "bob", password: "long-enough", roles: ["admin"] }, "roles"],
    ])("answers 400 for %j naming %s, storing nothing", async (payload, field) => {
      const before = (await userRows()).length;
      const body = expectError(await t.request({ method: "POST", url: url(), token: admin, payload }), 400);
      expect(body.field).toBe(field);
      expect((await userRows()).length).toBe(before);
    });

    it("accepts passwords of exactly 8 and 1024 characters", async () => {
      for (const [name, password] of [
        ["eight", "8".repeat(8)],
        ["long", "L".repeat(1024)],
      ]) {
        const res = await t.request({ method: "POST", url: url(), token: admin, payload: { name, password } });
        expect(res.statusCode).toBe(201);
      }
    });

    it("needs the project admin role, and 404 for an unknown project", async () => {
      const payload = { name: "mallory", password: "long-enough" };
      const member = await mintProjectToken(t.db, t.projectId, "member");
      expectError(await t.request({ method: "POST", url: url(), token: member, payload }), 403);
      expectError(await t.request({ method: "POST", url: url(), token: null, payload }), 403);
      expectError(await t.request({ method: "POST", url: url(), token: t.otherToken, payload }), 403);
      expectError(await t.request({ method: "GET", url: url(), token: member }), 403);
      expectError(
        await t.request({ method: "POST", url: `/v1/projects/${randomUUID()}/users`, token: admin, payload }),
        404,
      );
      expect((await userRows()).some((u) => u.name === "mallory")).toBe(false);
    });

    it("lists users without hashes and deletes one", async () => {
      const list = await t.request({ method: "GET", url: url(), token: admin });
      expect(list.statusCode).toBe(200);
      expect(list.body).not.toContain("scrypt");
      const alice = list.json().users.find((u: { name: string }) => u.name === "alice@example.com");
      expect(Object.keys(alice).sort()).toEqual(["createdAt", "id", "name", "projectId", "role"]);

      const racer = list.json().users.find((u: { name: string }) => u.name === "racer");
      expect((await t.request({ method: "DELETE", url: `${url()}/${racer.id}`, token: admin })).statusCode).toBe(200);
      expectError(await t.request({ method: "DELETE", url: `${url()}/${racer.id}`, token: admin }), 404);
      expectError(await t.request({ method: "DELETE", url: `${url()}/${alice.id}`, token: t.otherToken }), 403);
    });
  });

  describe("join tokens", () => {
    const url = () => `/v1/projects/${t.projectId}/joinTokens`;
    const joinRows = async () => await t.db.select().from(joinTokens);

    it("issues a one-hour token to a project token by default, stored hashed", async () => {
      const before = Date.now();
      const res = await t.request({ method: "POST", url: url() });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body).toEqual({
        id: expect.any(String),
        token: expect.stringMatching(/^kjt_/),
        projectId: t.projectId,
        expiresAt: expect.any(String),
        createdAt: expect.any(String),
        // Plain HTTP: no CA to pin (tls.test.ts covers the hash).
        caCertHash: null,
        // Plain HTTP on loopback (light-my-request's localhost): the command fetches the script unpinned.
        installCommand: expect.stringContaining(`KEELSON_JOIN_TOKEN='${body.token}' sh`),
      });
      expect(Date.parse(body.expiresAt)).toBeGreaterThanOrEqual(before + HOUR);
      expect(Date.parse(body.expiresAt)).toBeLessThanOrEqual(Date.now() + HOUR);
      const row = firstRow(await t.db.select().from(joinTokens).where(eq(joinTokens.id, body.id)));
      expect(row?.tokenHash).toBe(hashSecret(body.token));
      expect(JSON.stringify(await joinRows())).not.toContain(body.token);
      // A join token is not an API token.
      expectError(await t.request({ method: "GET", url: "/v1/projects", token: body.token }), 403);
    });

    it("takes expiresInMinutes from the admin too", async () => {
      const before = Date.now();
      const res = await t.request({ method: "POST", url: url(), token: admin, payload: { expiresInMinutes: 10_080 } });
      expect(res.statusCode).toBe(201);
      expect(Date.parse(res.json().expiresAt)).toBeGreaterThanOrEqual(before + 7 * 24 * HOUR);
    });

    it.each([[{ expiresInMinutes: 0 }], [{ expiresInMinutes: 10_081 }], [{ expiresInMinutes: "soon" }], [{ uses: 2 }]])(
      "answers 400 for %j, storing nothing",
      async (payload) => {
        const before = (await joinRows()).length;
        const body = expectError(await t.request({ method: "POST", url: url(), payload }), 400);
        expect(body.field).toBe(Object.keys(payload)[0]);
        expect((await joinRows()).length).toBe(before);
      },
    );

    it("answers 403 without a token and to another project's token", async () => {
      expectError(await t.request({ method: "POST", url: url(), token: null }), 403);
      expectError(await t.request({ method: "POST", url: url(), token: t.otherToken }), 403);
      expectError(await t.request({ method: "GET", url: url(), token: t.otherToken }), 403);
    });

    it("lists without secrets and revokes", async () => {
      const issued = (await t.request({ method: "POST", url: url() })).json();
      const list = await t.request({ method: "GET", url: url() });
      const entry = list.json().joinTokens.find((x: { id: string }) => x.id === issued.id);
      expect(entry).toEqual({
        id: issued.id,
        projectId: t.projectId,
        expiresAt: issued.expiresAt,
        usedAt: null,
        usedByNodeId: null,
        createdAt: issued.createdAt,
      });
      expect(list.body).not.toContain("kjt_");
      expectError(
        await t.request({
          method: "DELETE",
          url: `/v1/projects/${t.otherProjectId}/joinTokens/${issued.id}`,
          token: admin,
        }),
        404,
      );
      expect((await t.request({ method: "DELETE", url: `${url()}/${issued.id}` })).statusCode).toBe(200);
      await expect(t.db.transaction((tx) => consumeJoinToken(tx, issued.token, "node-x"))).rejects.toThrow(
        JoinTokenRejected,
      );
    });

    describe("consumeJoinToken", () => {
      const issue = async (payload?: object) =>
        (await t.request({ method: "POST", url: url(), ...(payload ? { payload } : {}) })).json() as {
          id: string;
          token: string;
        };
      const rejection = async (attempt: Promise<unknown>): Promise<JoinTokenRejected> => {
        try {
          await attempt;
        } catch (err) {
          expect(err).toBeInstanceOf(JoinTokenRejected);
          return err as JoinTokenRejected;
        }
        throw new Error("expected a rejection");
      };

      it("returns the project once, records who used it, then refuses it as used", async () => {
        const { id, token } = await issue();
        const projectId = await t.db.transaction((tx) => consumeJoinToken(tx, token, "node-1"));
        expect(projectId).toBe(t.projectId);
        const row = firstRow(await t.db.select().from(joinTokens).where(eq(joinTokens.id, id)));
        expect(row?.usedByNodeId).toBe("node-1");
        expect(Date.parse(row?.usedAt as string)).toBeLessThanOrEqual(Date.now());

        const err = await rejection(t.db.transaction((tx) => consumeJoinToken(tx, token, "node-2")));
        expect(err.reason).toBe("used");
        expect(err.statusCode).toBe(403);
        expect(err.message).toMatch(/already been used/);
        expect(firstRow(await t.db.select().from(joinTokens).where(eq(joinTokens.id, id)))?.usedByNodeId).toBe(
          "node-1",
        );
      });

      it("refuses an unknown token", async () => {
        const err = await rejection(t.db.transaction((tx) => consumeJoinToken(tx, generateSecret("kjt"), "n")));
        expect(err.reason).toBe("unknown");
        expect(err.code).toBe("join_token_unknown");
      });

      it("refuses an expired token and leaves it unused", async () => {
        const { id, token } = await issue({ expiresInMinutes: 5 });
        const later = new Date(Date.now() + 6 * 60_000);
        const err = await rejection(t.db.transaction((tx) => consumeJoinToken(tx, token, "n", later)));
        expect(err.reason).toBe("expired");
        expect(err.message).toMatch(/expired/);
        expect(firstRow(await t.db.select().from(joinTokens).where(eq(joinTokens.id, id)))?.usedAt).toBeNull();
      });

      it("is not burnt when the registration's transaction rolls back", async () => {
        const { token } = await issue();
        await expect(
          t.db.transaction(async (tx) => {
            await consumeJoinToken(tx, token, "node-a");
            throw new Error("node insert failed");
          }),
        ).rejects.toThrow("node insert failed");
        expect(await t.db.transaction((tx) => consumeJoinToken(tx, token, "node-b"))).toBe(t.projectId);
      });
    });
  });

  it("documents every identity route in the OpenAPI document", async () => {
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
    const paths = Object.keys(doc.paths);
    for (const path of [
      "/v1/projects",
      "/v1/projects/{projectId}",
      "/v1/projects/{projectId}/tokens",
      "/v1/projects/{projectId}/tokens/{tokenId}",
      "/v1/projects/{projectId}/users",
      "/v1/projects/{projectId}/users/{userId}",
      "/v1/projects/{projectId}/joinTokens",
      "/v1/projects/{projectId}/joinTokens/{joinTokenId}",
      "/keystone/v3/auth/tokens",
    ]) {
      expect(paths).toContain(path);
    }
    expect(doc.paths["/keystone/v3/auth/tokens"].post.security).toEqual([]);
  });
});
