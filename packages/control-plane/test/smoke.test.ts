import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
