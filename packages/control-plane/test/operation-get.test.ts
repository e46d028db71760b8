import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, mintProjectToken, type TestApp } from "./helpers.ts";

/** GET /v1/operations/{uuid}: one operation, for callers who may see its project (the CLI's `operations get`). */
describe("GET /v1/operations/{uuid}", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it("answers the operation as the list shows it; another project's and unknown ones are 404, no token 403", async () => {
    const created = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/clusters`,
      payload: { name: "op-get" },
    });
    expect(created.statusCode).toBe(200);
    const listed = (await t.request({ method: "GET", url: `/v4/${t.projectId}/operations` })).json<
      { uuid: string }[]
    >();
    const first = listed[0];
    expect(first).toBeDefined();
    const uuid = first?.uuid as string;

    const reader = await mintProjectToken(t.db, t.projectId, "reader");
    const one = await t.request({ method: "GET", url: `/v1/operations/${uuid}`, token: reader });
    expect(one.statusCode).toBe(200);
    // The list is read again: the operation may have moved on since.
    const again = (await t.request({ method: "GET", url: `/v4/${t.projectId}/operations` })).json<{ uuid: string }[]>();
    expect(one.json()).toMatchObject({ uuid, projectId: t.projectId, kind: "cluster.create" });
    expect(Object.keys(one.json()).sort()).toEqual(Object.keys(again.find((o) => o.uuid === uuid) ?? {}).sort());

    const foreign = await t.request({ method: "GET", url: `/v1/operations/${uuid}`, token: t.otherToken });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toMatchObject({ code: "not_found", message: `operation ${uuid} does not exist` });
    expect((await t.request({ method: "GET", url: "/v1/operations/nope" })).statusCode).toBe(404);
    expect((await t.request({ method: "GET", url: `/v1/operations/${uuid}`, token: null })).statusCode).toBe(403);
  });
});
