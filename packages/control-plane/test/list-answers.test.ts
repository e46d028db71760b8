// The large lists' answers: compression negotiated from Accept-Encoding (cached lists encoded
// once), entity tags from the bytes with 304 for If-None-Match, paging with limit and continue.
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { clusters } from "@keelson/db";
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { insertCluster, insertHost } from "./node-fixtures.ts";

const LISTS = ["/v4/{p}/clusters", "/v3/{p}/clusters", "/v4/{p}/nodes", "/v3/{p}/nodes", "/v1/hosts"] as const;

describe("large lists", () => {
  let t: TestApp;
  const url = (list: string, query = "") => `${list.replace("{p}", t.projectId)}${query}`;

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    // Enough for each list to pass the compression threshold, created in one millisecond or
    // apart alike: the order ties on creation time.
    for (let i = 0; i < 12; i++) {
      await insertCluster(t.db, t.projectId, `c-${String(i).padStart(2, "0")}`);
      await insertHost(t.db, t.projectId, { name: `h-${String(i).padStart(2, "0")}` });
    }
    return () => t.close();
  });

  const get = (path: string, headers: Record<string, string> = {}) => t.request({ method: "GET", url: path, headers });

  it.each(LISTS)(
    "%s: no Accept-Encoding gets the plain JSON bytes; gzip and br decode to the same bytes",
    async (list) => {
      const plain = await get(url(list));
      expect(plain.statusCode).toBe(200);
      expect(plain.headers["content-encoding"]).toBeUndefined();
      expect(plain.headers["content-type"]).toBe("application/json; charset=utf-8");
      // The bytes JSON.stringify gives, as before compression existed.
      expect(plain.body).toBe(JSON.stringify(plain.json()));
      const items = plain.json() as unknown[];
      expect(items.length).toBeGreaterThanOrEqual(12);

      const gz = await get(url(list), { "accept-encoding": "gzip" });
      expect(gz.headers["content-encoding"]).toBe("gzip");
      expect(gz.headers.vary).toContain("accept-encoding");
      expect(gunzipSync(gz.rawPayload).toString()).toBe(plain.body);
      const br = await get(url(list), { "accept-encoding": "gzip, deflate, br" });
      expect(br.headers["content-encoding"]).toBe("br");
      expect(brotliDecompressSync(br.rawPayload).toString()).toBe(plain.body);
      expect(br.rawPayload.length).toBeLessThan(plain.rawPayload.length);
      const identity = await get(url(list), { "accept-encoding": "identity" });
      expect(identity.headers["content-encoding"]).toBeUndefined();
      expect(identity.body).toBe(plain.body);
    },
  );

  it.each(LISTS)(
    "%s: an ETag from the bytes; If-None-Match answers 304 with no body until the list changes",
    async (list) => {
      const first = await get(url(list), { "accept-encoding": "br" });
      const etag = first.headers.etag as string;
      expect(etag).toMatch(/^W\/"[A-Za-z0-9_-]{32}"$/);
      // The same tag for every coding of the same list.
      expect((await get(url(list))).headers.etag).toBe(etag);
      const unchanged = await get(url(list), { "if-none-match": etag, "accept-encoding": "gzip" });
      expect(unchanged.statusCode).toBe(304);
      expect(unchanged.rawPayload.length).toBe(0);
      expect(unchanged.headers.etag).toBe(etag);
      expect((await get(url(list), { "if-none-match": `"other", ${etag}` })).statusCode).toBe(304);
      expect((await get(url(list), { "if-none-match": '"other"' })).statusCode).toBe(200);

      await insertCluster(t.db, t.projectId, `added-${list.replaceAll("/", "")}`);
      await insertHost(t.db, t.projectId, { name: `added-${list.replaceAll("/", "")}` });
      const changed = await get(url(list), { "if-none-match": etag });
      expect(changed.statusCode).toBe(200);
      expect(changed.headers.etag).not.toBe(etag);
    },
  );

  it("a cached list is encoded once: the same compressed bytes answer again", async () => {
    const list = url("/v4/{p}/clusters");
    const a = await get(list, { "accept-encoding": "gzip" });
    const b = await get(list, { "accept-encoding": "gzip" });
    expect(b.rawPayload.equals(a.rawPayload)).toBe(true);
    expect(b.headers["content-length"]).toBe(String(a.rawPayload.length));
  });

  it.each(LISTS)("%s: pages of `limit` chained by the Link header give the whole list once", async (list) => {
    const whole = (await get(url(list), { "x-auth-token": ADMIN_TOKEN })).json() as { uuid?: string; id?: string }[];
    const seen: unknown[] = [];
    let next: string | undefined = url(list, "?limit=5");
    let pages = 0;
    while (next) {
      const page = await get(next);
      expect(page.statusCode).toBe(200);
      const items = page.json() as unknown[];
      expect(items.length).toBeLessThanOrEqual(5);
      seen.push(...items);
      pages++;
      const link = page.headers.link as string | undefined;
      next = link ? /^<([^>]+)>; rel="next"$/.exec(link)?.[1] : undefined;
      if (link) expect(next).toMatch(/[?&]limit=5&continue=[A-Za-z0-9_-]+$/);
    }
    expect(pages).toBe(Math.ceil(whole.length / 5));
    expect(seen).toEqual(whole);
  });

  it("a page starts after its marker when items before it were deleted, and at the marker's time when it was", async () => {
    const list = url("/v4/{p}/clusters");
    const whole = (await get(list)).json() as { uuid: string }[];
    const first = await get(`${list}?limit=3`);
    const marker = /continue=([^&>]+)/.exec(first.headers.link as string)?.[1] as string;
    const firstUuids = (first.json() as { uuid: string }[]).map((c) => c.uuid);
    // Deleting an item before the marker moves no later item out of the next page.
    await t.db.delete(clusters).where(eq(clusters.id, firstUuids[0] as string));
    const second = (await get(`${list}?limit=3&continue=${marker}`)).json() as { uuid: string }[];
    expect(second.map((c) => c.uuid)).toEqual(whole.slice(3, 6).map((c) => c.uuid));
    // The marker's own item gone: the page starts at its creation time, skipping nothing after it.
    await t.db.delete(clusters).where(eq(clusters.id, firstUuids[2] as string));
    const resumed = (await get(`${list}?limit=100&continue=${marker}`)).json() as { uuid: string }[];
    const after = whole.slice(3).map((c) => c.uuid);
    expect(resumed.map((c) => c.uuid)).toEqual(expect.arrayContaining(after));
    expect(resumed.map((c) => c.uuid)).not.toContain(firstUuids[2]);
  });

  it("cluster pages follow (creation time, uuid): a gone marker's page goes on after its place, repeating nothing", async () => {
    // Three clusters of one millisecond: only the uuid orders them.
    const at = "2020-01-01T00:00:00.000Z";
    const ids: string[] = [];
    for (const name of ["same-a", "same-b", "same-c"]) {
      const id = await insertCluster(t.db, t.projectId, name);
      await t.db.update(clusters).set({ createdAt: at }).where(eq(clusters.id, id));
      ids.push(id);
    }
    ids.sort();
    const list = url("/v4/{p}/clusters");
    const first = await get(`${list}?limit=2`);
    expect((first.json() as { uuid: string }[]).map((c) => c.uuid)).toEqual(ids.slice(0, 2));
    const marker = /continue=([^&>]+)/.exec(first.headers.link as string)?.[1] as string;
    // The marker's cluster (the second) is deleted; the first, of the same time, stays.
    await t.db.delete(clusters).where(eq(clusters.id, ids[1] as string));
    const next = (await get(`${list}?limit=1&continue=${marker}`)).json() as { uuid: string }[];
    expect(next.map((c) => c.uuid)).toEqual([ids[2]]);
    for (const id of [ids[0], ids[2]]) await t.db.delete(clusters).where(eq(clusters.id, id as string));
  });

  it.each(LISTS)("%s: a bad limit or marker is a 400 naming the field", async (list) => {
    for (const [query, field] of [
      ["?limit=0", "limit"],
      ["?limit=10001", "limit"],
      ["?limit=ten", "limit"],
      ["?limit=1.5", "limit"],
      ["?continue=bm90IGEgbWFya2Vy", "continue"],
      ["?limit=2&continue=%5B%22x%22%5D", "continue"],
      ["?continue=!!", "continue"],
    ] as const) {
      const res = await get(url(list, query));
      expect(res.statusCode, query).toBe(400);
      expect(res.json(), query).toMatchObject({ field });
      expect(typeof res.json().code).toBe("string");
      expect(typeof res.json().message).toBe("string");
    }
  });

  it("documents paging in /openapi.json as the x-keelson-paging extension of each paged list", async () => {
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
    for (const path of [
      "/v4/{project_uuid}/clusters",
      "/v3/{project_uuid}/clusters",
      "/v4/{project_uuid}/nodes",
      "/v3/{project_uuid}/nodes",
      "/v1/hosts",
    ]) {
      const get = doc.paths[path]?.get;
      expect(get?.["x-keelson-paging"], path).toMatchObject({ limitParameter: "limit", continueParameter: "continue" });
      expect(
        get.parameters.map((p: { name: string }) => p.name),
        path,
      ).toEqual(expect.arrayContaining(["limit", "continue"]));
    }
  });
});

describe("cached lists on two replicas of one database", () => {
  it("a write through one replica shows in the other's next read, with a new tag; the tag is the same on both", async () => {
    const a = await createTestApp({ runOperations: false, settings: { replicaId: "cp-a" } });
    const b = await createTestApp({ runOperations: false, dataDir: a.dataDir, settings: { replicaId: "cp-b" } });
    try {
      const list = `/v4/${a.projectId}/clusters`;
      await insertCluster(a.db, a.projectId, "first");
      const onA = await a.request({ method: "GET", url: list, headers: { "accept-encoding": "gzip" } });
      const onB = await b.request({ method: "GET", url: list });
      expect(onB.headers.etag).toBe(onA.headers.etag);
      // Warm on both; then b writes through its API.
      const created = await b.request({ method: "POST", url: list, payload: { name: "second" } });
      expect(created.statusCode).toBe(200);
      const after = await a.request({
        method: "GET",
        url: list,
        headers: { "if-none-match": onA.headers.etag as string },
      });
      expect(after.statusCode).toBe(200);
      expect((after.json() as { name: string }[]).map((c) => c.name)).toEqual(["first", "second"]);
      expect(after.headers.etag).toBe((await b.request({ method: "GET", url: list })).headers.etag);
    } finally {
      await b.close(true);
      await a.close();
    }
  });
});
