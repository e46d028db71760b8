import { clusters, users } from "@keelson/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

/** A JSON text whose string holds an unpaired surrogate: valid JSON, not valid Unicode. */
const LONE = "\\ud800";

describe("bad input in the API's error vocabulary", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
  });
  afterAll(async () => t.close());

  const post = (url: string, payload: string, token?: string) =>
    t.request({
      method: "POST",
      url,
      payload,
      headers: { "content-type": "application/json" },
      ...(token ? { token } : {}),
    });

  it("refuses a string with an unpaired surrogate as a 400 naming the field, storing nothing", async () => {
    const clustersBefore = (await t.db.select().from(clusters)).length;
    const usersBefore = (await t.db.select().from(users)).length;
    const cases: [string, string, string][] = [
      [`/v4/${t.projectId}/clusters`, `{"name":"a${LONE}b"}`, "name"],
      [`/v3/${t.projectId}/clusters`, `{"name":"ok","masterVipIface":"${LONE}"}`, "masterVipIface"],
      [`/v4/${t.projectId}/clusters`, `{"name":"ok","etcdBackup":{"localPath":"/x${LONE}"}}`, "etcdBackup.localPath"],
      [`/v4/${t.projectId}/clusters`, `{"name":"ok","tags":{"${LONE}":"v"}}`, `tags.${"\ud800"}`],
      [
        `/v4/${t.projectId}/clusters/00000000-0000-4000-8000-000000000000/attach`,
        `[{"uuid":"x"},{"uuid":"${LONE}"}]`,
        "[1].uuid",
      ],
      [`/v1/projects/${t.projectId}/users`, `{"name":"${LONE}","password":"long enough pw"}`, "name"],
    ];
    for (const [url, payload, field] of cases) {
      const res = await post(url, payload, url.startsWith("/v1/projects") ? ADMIN_TOKEN : undefined);
      expect(res.statusCode, `${url} ${payload}`).toBe(400);
      expect(res.json()).toEqual({
        code: "invalid_text",
        message: `${field} must be valid Unicode text (it holds an unpaired surrogate)`,
        field,
      });
    }
    expect(await t.db.select().from(clusters)).toHaveLength(clustersBefore);
    expect(await t.db.select().from(users)).toHaveLength(usersBefore);
  });

  it("still takes every well-formed string, astral characters included", async () => {
    const res = await post(`/v4/${t.projectId}/clusters`, `{"name":"ok-\\ud83d\\ude80-ünïcode"}`);
    expect(res.statusCode, res.body).toBe(200);
  });

  it("answers malformed JSON with invalid_json naming the body, not Fastify's own code", async () => {
    const res = await post(`/v4/${t.projectId}/clusters`, `{"name": "x",`);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "invalid_json", field: "body" });
    expect(res.json().code).not.toMatch(/^FST_/);
  });

  it("answers an unsupported media type with 415 unsupported_media_type", async () => {
    const res = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/clusters`,
      payload: "name=x",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: "unsupported_media_type" });
  });

  it("answers a body over the limit with 413 body_too_large", async () => {
    const res = await post(`/v4/${t.projectId}/clusters`, `{"name":"${"x".repeat(2 * 1024 * 1024)}"}`);
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ code: "body_too_large", field: "body" });
  });

  it("answers a URL holding an encoded lone surrogate with a 400 in the API's shape", async () => {
    const res = await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters/%ED%A0%80` });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "bad_request" });
  });
});
