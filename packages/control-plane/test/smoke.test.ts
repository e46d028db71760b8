import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stripCompatPrefix } from "../src/http/compat-prefix.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

describe("app skeleton", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it("answers healthz without a token", async () => {
    const res = await t.request({ method: "GET", url: "/healthz", token: null });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
  });

  it("serves the same route under /qbert", async () => {
    const res = await t.request({ method: "GET", url: "/qbert/healthz", token: null });
    expect(res.statusCode).toBe(200);
  });

  it("keeps a path when /qbert is followed by a query", () => {
    const rewrite = (url: string) => stripCompatPrefix({ url } as Parameters<typeof stripCompatPrefix>[0]);
    expect(rewrite("/qbert?nocatalog=1")).toBe("/?nocatalog=1");
    expect(rewrite("/qbert")).toBe("/");
    expect(rewrite("/qbert/v1/projects?x=1")).toBe("/v1/projects?x=1");
    expect(rewrite("/qbertz/v1/projects")).toBe("/qbertz/v1/projects");
    expect(rewrite("/resmgr/v1/hosts/h")).toBe("/v1/hosts/h");
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await t.request({ method: "GET", url: "/v9/nothing" });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe("route_not_found");
  });

  it("serves an OpenAPI 3.1 document", async () => {
    const res = await t.request({ method: "GET", url: "/openapi.json", token: null });
    expect(res.statusCode).toBe(200);
    expect(res.json().openapi).toBe("3.1.0");
  });
});

describe("malformed requests", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it("answers a badly encoded URL with a JSON 400 in the API's error shape", async () => {
    const res = await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters/%E0%A4%A` });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "bad_request" });
  });
});

describe("the test app helper", () => {
  let made: TestApp | undefined;

  it("makes an app inside a test …", async () => {
    made = await createTestApp({ runOperations: false });
    expect(await made.store.ping()).toBeUndefined();
    expect((await made.request({ url: "/healthz", token: null })).statusCode).toBe(200);
  });

  it("… that closed itself when that test ended, data dir removed", async () => {
    await expect(made?.store.ping()).rejects.toThrow();
    expect(existsSync(made?.dataDir as string)).toBe(false);
  });
});
