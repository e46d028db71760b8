import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_DIST } from "../src/routes/console.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/** The console's static files at /ui/, as built by scripts/ensure-deps.sh (packages/console). */
describe("web console at /ui", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it("is built by the install step", () => {
    expect(existsSync(join(CONSOLE_DIST, "index.html")), `${CONSOLE_DIST} (scripts/ensure-deps.sh builds it)`).toBe(
      true,
    );
  });

  it("redirects / and /ui to /ui/", async () => {
    for (const url of ["/", "/ui"]) {
      const res = await t.request({ method: "GET", url, token: null });
      expect(res.statusCode, url).toBe(302);
      expect(res.headers.location).toBe("/ui/");
    }
  });

  it("serves index.html without a token and never from a cache", async () => {
    const res = await t.request({ method: "GET", url: "/ui/", token: null });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/html/);
    expect(res.headers["cache-control"]).toBe("no-cache");
    expect(res.body).toBe(readFileSync(join(CONSOLE_DIST, "index.html"), "utf8"));
  });

  it("serves every hashed asset the page names with a year's immutable cache", async () => {
    const index = readFileSync(join(CONSOLE_DIST, "index.html"), "utf8");
    const named = [...index.matchAll(/\/ui\/assets\/([\w.-]+)/g)].map((m) => m[1] as string);
    expect(named.some((f) => f.endsWith(".js"))).toBe(true);
    expect(named.some((f) => f.endsWith(".css"))).toBe(true);
    for (const file of named) {
      const res = await t.request({ method: "GET", url: `/ui/assets/${file}`, token: null });
      expect(res.statusCode, file).toBe(200);
      expect(res.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
      expect(res.rawPayload.equals(readFileSync(join(CONSOLE_DIST, "assets", file)))).toBe(true);
    }
    expect(readdirSync(join(CONSOLE_DIST, "assets")).length).toBeGreaterThanOrEqual(named.length);
  });

  it("answers a missing asset or a path outside assets/ with a JSON 4xx, never a file", async () => {
    const missing = await t.request({ method: "GET", url: "/ui/assets/nothing-here.js", token: null });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: expect.any(String), message: expect.any(String) });
    const outside = await t.request({ method: "GET", url: "/ui/assets/..%2F..%2Fpackage.json", token: null });
    expect(outside.statusCode).toBeGreaterThanOrEqual(400);
    expect(outside.statusCode).toBeLessThan(500);
    expect(outside.body).not.toContain("@keelson/console");
  });
});
