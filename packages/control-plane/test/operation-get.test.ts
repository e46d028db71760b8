import { gunzipSync } from "node:zlib";
import { operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listOperations, operationById, recordOperation } from "../src/runner/store.ts";
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

  it("answers the params as recorded: the same bytes as serialising the record, alone and in the list", async () => {
    const params = {
      nodes: ["n-1", "n-2"],
      note: 'é ✓ \u2028 " \\ </script>',
      half: 1.5,
      nested: { deep: [null, true, 0, { empty: {} }] },
    };
    const target = "target-of-bytes";
    // A kind no runner knows: it stays pending, as recorded.
    const op = await recordOperation(t.db, {
      projectId: t.projectId,
      kind: "test.bytes",
      targetType: "cluster",
      targetId: target,
      params,
    });
    const expected = {
      uuid: op.id,
      projectId: t.projectId,
      kind: "test.bytes",
      targetType: "cluster",
      targetUuid: target,
      state: "pending",
      step: 0,
      attempts: 0,
      error: null,
      params,
      createdAt: op.createdAt,
      startedAt: null,
      finishedAt: null,
      replica: null,
    };
    const one = await t.request({ method: "GET", url: `/v1/operations/${op.id}` });
    expect(one.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(one.body).toBe(JSON.stringify(expected));
    const listed = await t.request({ method: "GET", url: `/v4/${t.projectId}/operations?target=${target}` });
    expect(listed.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(listed.body).toBe(JSON.stringify([expected]));
    const none = await t.request({ method: "GET", url: `/v4/${t.projectId}/operations?target=nothing-here` });
    expect(none.body).toBe("[]");
  });

  it("shows the cursor's step, read by the database, and never the cursor itself", async () => {
    const created = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/clusters`,
      payload: { name: "op-step" },
    });
    const clusterId = created.json<{ uuid: string }>().uuid;
    await t.app.keelson.runner.idle();
    const [op] = await listOperations(t.db, t.projectId, { targetId: clusterId, limit: 1 });
    const id = op?.id as string;
    // A rollout's cursor: a step and the progress of 1,000 nodes.
    const nodeIds = Array.from({ length: 1000 }, (_, i) => `node-${i}-${"x".repeat(30)}`);
    const stepOf = async () => {
      const listed = await t.request({
        method: "GET",
        url: `/v4/${t.projectId}/operations?target=${clusterId}&limit=1`,
      });
      const one = await t.request({ method: "GET", url: `/v1/operations/${id}` });
      expect(one.json().step).toBe(listed.json()[0].step);
      return one.json().step as number;
    };
    for (const [cursor, step] of [
      [{ step: 2, stepName: "roll", progress: { started: nodeIds, done: nodeIds.slice(0, 500) } }, 2],
      [{ step: 7, progress: {} }, 7],
      [{ progress: {} }, 0],
      [null, 0],
    ] as const) {
      await t.db.update(operations).set({ cursor }).where(eq(operations.id, id));
      expect(await stepOf(), JSON.stringify(cursor).slice(0, 40)).toBe(step);
    }
    expect(Object.keys((await operationById(t.db, id)) ?? {})).not.toContain("cursor");
  });

  it("tags a polled answer, and sends the same encoding again while it is unchanged; a change is a new answer", async () => {
    // Params of a rollout's size in miniature: above the compression threshold.
    const params = { nodes: Array.from({ length: 100 }, (_, i) => `polled-node-${i}`) };
    const op = await recordOperation(t.db, {
      projectId: t.projectId,
      kind: "test.polled",
      targetType: "cluster",
      targetId: "target-polled",
      params,
    });
    for (const url of [`/v1/operations/${op.id}`, `/v4/${t.projectId}/operations?target=target-polled`]) {
      const poll = (headers: Record<string, string> = {}) =>
        t.request({ method: "GET", url, headers: { "accept-encoding": "gzip", ...headers } });
      const first = await poll();
      expect(first.headers["content-encoding"]).toBe("gzip");
      const etag = first.headers.etag as string;
      expect(etag).toMatch(/^W\/"/);
      const again = await poll();
      expect(again.headers.etag).toBe(etag);
      expect(again.rawPayload.equals(first.rawPayload)).toBe(true);
      const plain = await t.request({ method: "GET", url });
      expect(gunzipSync(first.rawPayload).toString()).toBe(plain.body);
      expect(plain.headers.etag).toBe(etag);
      expect((await poll({ "if-none-match": etag })).statusCode).toBe(304);

      // The operation moves on: the next poll is its new state, under a new tag.
      const state = url.startsWith("/v1") ? "running" : "succeeded";
      await t.db.update(operations).set({ state }).where(eq(operations.id, op.id));
      const moved = await poll({ "if-none-match": etag });
      expect(moved.statusCode).toBe(200);
      expect(moved.headers.etag).not.toBe(etag);
      const body = JSON.parse(gunzipSync(moved.rawPayload).toString());
      expect((Array.isArray(body) ? body[0] : body).state).toBe(state);
    }
  });
});
