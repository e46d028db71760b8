// Pages of the node and host lists, read in SQL in their order (creation time, name, uuid): a
// gone marker's page goes on after its place, an older marker without the name still works,
// and a page's tag and encodings are its own (list-answers.test.ts covers what all lists share).
import { gunzipSync } from "node:zlib";
import { nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { insertHost, sampleFacts } from "./node-fixtures.ts";

/** The lists and the token reading them: /v1/hosts for a project token and for the admin (every project). */
const LISTS = [
  ["/v4/{p}/nodes", undefined],
  ["/v3/{p}/nodes", undefined],
  ["/v1/hosts", undefined],
  ["/v1/hosts", ADMIN_TOKEN],
] as const;
type Item = { uuid?: string; id?: string };
const idOf = (item: Item) => (item.uuid ?? item.id) as string;
const marker = (parts: string[]) => Buffer.from(JSON.stringify(parts)).toString("base64url");
const continueOf = (link: unknown) => /continue=([^&>]+)/.exec(link as string)?.[1] as string;

describe("node and host pages", () => {
  let t: TestApp;
  const url = (list: string, query = "") => `${list.replace("{p}", t.projectId)}${query}`;
  const get = (path: string, token?: string, headers: Record<string, string> = {}) =>
    t.request({ method: "GET", url: path, headers, ...(token ? { token } : {}) });

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    for (let i = 0; i < 6; i++) {
      const name = `h-${i}`;
      await insertHost(t.db, t.projectId, { name, facts: sampleFacts(name, `10.0.1.${i}`) });
      await insertHost(t.db, t.otherProjectId, { name: `other-${i}` });
    }
    return () => t.close();
  });

  /**
   * Before each test, five hosts of one millisecond, before all others, whose names share a
   * prefix and two of which share a name: only the name and then the uuid order them.
   */
  const SAME_MS = "2000-01-01T00:00:00.000Z";
  beforeEach(async () => {
    for (const [i, name] of ["same-a", "same-b", "same-b", "same-c", "same-d"].entries()) {
      const row = await insertHost(t.db, t.projectId, { name, facts: sampleFacts(name, `10.0.2.${i}`) });
      await t.db.update(nodes).set({ createdAt: SAME_MS }).where(eq(nodes.id, row.id));
    }
    return async () => {
      await t.db.delete(nodes).where(eq(nodes.createdAt, SAME_MS));
    };
  });

  it.each(LISTS)(
    "%s (admin: %s): a gone marker's page goes on right after its place, repeating nothing",
    async (list, token) => {
      const whole = ((await get(url(list), token)).json() as Item[]).map(idOf);
      const first = await get(url(list, "?limit=3"), token);
      expect((first.json() as Item[]).map(idOf)).toEqual(whole.slice(0, 3));
      const next = continueOf(first.headers.link);
      // The marker's host (the third, of the same millisecond as the two before and after it) is deleted.
      await t.db.delete(nodes).where(eq(nodes.id, whole[2] as string));
      const rest = await get(url(list, `?limit=100&continue=${next}`), token);
      expect(rest.statusCode).toBe(200);
      expect((rest.json() as Item[]).map(idOf)).toEqual(whole.slice(3));
      expect(rest.headers.link).toBeUndefined();
    },
  );

  it.each(LISTS)(
    "%s (admin: %s): pages of 2 chained by their Link give the whole list once, ties included",
    async (list, token) => {
      const whole = ((await get(url(list), token)).json() as Item[]).map(idOf);
      const seen: string[] = [];
      let path: string | undefined = url(list, "?limit=2");
      while (path) {
        const page = await get(path, token);
        seen.push(...(page.json() as Item[]).map(idOf));
        path = page.headers.link ? /^<([^>]+)>/.exec(page.headers.link as string)?.[1] : undefined;
      }
      expect(seen).toEqual(whole);
    },
  );

  it("a marker without the name, as pages gave before, starts after its host; with that host gone, at its time", async () => {
    const list = url("/v4/{p}/nodes");
    const whole = (await get(list)).json() as { uuid: string; createdAt?: string }[];
    const ids = whole.map((n) => n.uuid);
    const pair = marker([SAME_MS, ids[1] as string]);
    const after = (await get(`${list}?limit=2&continue=${pair}`)).json() as Item[];
    expect(after.map(idOf)).toEqual(ids.slice(2, 4));
    // Gone: from the first host of its millisecond on, skipping nothing (the one before it comes again).
    await t.db.delete(nodes).where(eq(nodes.id, ids[1] as string));
    const resumed = (await get(`${list}?limit=100&continue=${pair}`)).json() as Item[];
    expect(resumed.map(idOf)).toEqual([ids[0], ...ids.slice(2)]);
  });

  it("a marker without the name naming another project's host places nothing by it: the page starts at its time", async () => {
    const other = await insertHost(t.db, t.otherProjectId, { name: "same-b" });
    await t.db.update(nodes).set({ createdAt: SAME_MS }).where(eq(nodes.id, other.id));
    for (const list of ["/v4/{p}/nodes", "/v1/hosts"]) {
      const whole = ((await get(url(list))).json() as Item[]).map(idOf);
      const page = await get(url(list, `?limit=100&continue=${marker([SAME_MS, other.id])}`));
      expect((page.json() as Item[]).map(idOf), list).toEqual(whole);
    }
  });

  it.each(LISTS)(
    "%s (admin: %s): a page has its own tag, 304 with its Link, and its own compressed bytes",
    async (list, token) => {
      const whole = await get(url(list), token);
      const plain = await get(url(list, "?limit=4"), token);
      expect(plain.headers.link).toMatch(/rel="next"$/);
      expect(plain.headers.etag).not.toBe(whole.headers.etag);
      const unchanged = await get(url(list, "?limit=4"), token, { "if-none-match": plain.headers.etag as string });
      expect(unchanged.statusCode).toBe(304);
      expect(unchanged.headers.link).toBe(plain.headers.link);
      // The whole list's tag does not answer for a page, nor the reverse.
      expect(
        (await get(url(list, "?limit=4"), token, { "if-none-match": whole.headers.etag as string })).statusCode,
      ).toBe(200);
      expect((await get(url(list), token, { "if-none-match": plain.headers.etag as string })).statusCode).toBe(200);
      const gz = await get(url(list, "?limit=4"), token, { "accept-encoding": "gzip" });
      expect(plain.rawPayload.length).toBeGreaterThan(1024);
      expect(gz.headers["content-encoding"]).toBe("gzip");
      expect(gunzipSync(gz.rawPayload).toString()).toBe(plain.body);
      // The whole list after the pages: the same bytes as before them.
      expect((await get(url(list), token)).body).toBe(whole.body);
    },
  );

  it.each(LISTS)(
    "%s (admin: %s): a page whose items stay but which gains a next page is not 304: its tag covers its Link",
    async (list, token) => {
      const count = ((await get(url(list), token)).json() as Item[]).length;
      const all = await get(url(list, `?limit=${count}`), token);
      expect(all.headers.link).toBeUndefined();
      const later = await insertHost(t.db, t.projectId, { name: "zz-later" });
      try {
        const again = await get(url(list, `?limit=${count}`), token, { "if-none-match": all.headers.etag as string });
        expect(again.statusCode).toBe(200);
        expect(again.body).toBe(all.body);
        expect(again.headers.link).toMatch(/rel="next"$/);
        expect(again.headers.etag).not.toBe(all.headers.etag);
      } finally {
        await t.db.delete(nodes).where(eq(nodes.id, later.id));
      }
    },
  );

  it("a marker of three parts that are not all strings, or of four, is a 400 naming continue", async () => {
    for (const parts of [
      ["2000-01-01T00:00:00.000Z", "x", 1],
      ["a", "b", "c", "d"],
    ]) {
      const res = await get(url("/v4/{p}/nodes", `?limit=2&continue=${marker(parts as string[])}`));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ field: "continue", code: "invalid_continue" });
    }
  });
});
