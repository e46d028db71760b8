import { join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { openSqliteConnection, projects } from "@keelson/db";
import { eq } from "drizzle-orm";
import postgres from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { databaseFor } from "../../../test/support/postgres-database.ts";
import { SnapshotCache } from "../src/http/snapshot-cache.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

function projectsIdIs(id: string) {
  return eq(projects.id, id);
}

/** The cached answer's body as text. */
async function text(cache: SnapshotCache, key: string, produce: () => Promise<string>): Promise<string> {
  return (await cache.get(key, produce)).body.toString();
}

describe("SnapshotCache", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await createTestApp({ runOperations: false });
  });
  afterEach(async () => t.close());

  /**
   * Two reads in a row with nothing written between them give one computation. On PostgreSQL
   * the stamp is the server's snapshot, which other test files' databases on the same server
   * move too (a miss, never a stale read): a few tries find a quiet moment.
   */
  async function servedTwice(cache: SnapshotCache, produce: () => Promise<string>): Promise<boolean> {
    for (let i = 0; i < 50; i++) {
      const first = await text(cache, "k", produce);
      const second = await text(cache, "k", produce);
      if (first === second) return true;
    }
    return false;
  }

  /** A write by a connection that is not the store's: an operator's sqlite3 shell, another replica. */
  async function writeElsewhere(name: string): Promise<void> {
    if (t.store.dialect === "sqlite") {
      const other = openSqliteConnection(join(t.dataDir, "keelson.sqlite"));
      try {
        other.prepare("update projects set name = ? where id = ?").run(name, t.otherProjectId);
      } finally {
        other.close();
      }
      return;
    }
    const other = postgres(await databaseFor(t.dataDir), { max: 1, onnotice: () => {} });
    try {
      await other`update projects set name = ${name} where id = ${t.otherProjectId}`;
    } finally {
      await other.end({ timeout: 1 });
    }
  }

  it("serves the same bytes while nothing was written, recomputes after any write", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let calls = 0;
    const produce = async () => `v${++calls}`;
    expect(await servedTwice(cache, produce)).toBe(true);
    const before = calls;
    await t.db.update(projects).set({ name: "renamed" }).where(projectsIdIs(t.otherProjectId));
    expect(await text(cache, "k", produce)).toBe(`v${before + 1}`);
  });

  it("recomputes after another connection wrote to the database", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let calls = 0;
    const produce = async () => `v${++calls}`;
    expect(await servedTwice(cache, produce)).toBe(true);
    const before = calls;
    await writeElsewhere("elsewhere");
    expect(await text(cache, "k", produce)).toBe(`v${before + 1}`);
  });

  it("does not keep a value whose computation wrote to the database", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let n = 0;
    const writing = async () => {
      await t.db
        .update(projects)
        .set({ name: `w${++n}` })
        .where(projectsIdIs(t.otherProjectId));
      return `w${n}`;
    };
    expect(await text(cache, "k", writing)).toBe("w1");
    expect(await text(cache, "k", writing)).toBe("w2");
  });

  it("never files a value under a newer stamp another request saw meanwhile (stamp reads answered out of order)", async () => {
    // Stamps as a pool may answer them: A's second read was taken before B's first, and
    // answers after it.
    const answers = ["S1", "S2", "S2", "S1", "S2"];
    const cache = new SnapshotCache(async () => answers.shift() as string);
    let releaseA: () => void = () => {};
    const a = text(cache, "k", () => new Promise<string>((done) => (releaseA = () => done("computed at S1"))));
    await new Promise((r) => setImmediate(r));
    expect(await text(cache, "k", async () => "computed at S2")).toBe("computed at S2");
    releaseA();
    expect(await a).toBe("computed at S1");
    expect(await text(cache, "k", async () => "recomputed")).toBe("computed at S2");
  });

  it("reflects a cluster update in the next read", async () => {
    const t2 = await createTestApp();
    const base = `/v4/${t2.projectId}/clusters`;
    const { uuid } = (await t2.request({ method: "POST", url: base, payload: { name: "c" } })).json();
    await t2.app.keelson.runner.idle();
    expect((await t2.request({ method: "GET", url: `${base}/${uuid}` })).json().certExpiryHrs).toBe(24);
    await t2.request({ method: "PUT", url: `${base}/${uuid}`, payload: { certExpiryHrs: 7 } });
    expect((await t2.request({ method: "GET", url: `${base}/${uuid}` })).json().certExpiryHrs).toBe(7);
    expect((await t2.request({ method: "GET", url: base })).json()[0].certExpiryHrs).toBe(7);
  });
});

describe("SnapshotCache: bytes, encodings, concurrent misses", () => {
  /** A change stamp the test moves by hand, as a write would. */
  function stamps() {
    let n = 0;
    return { stamp: async () => `s${n}`, write: () => void n++ };
  }

  it("keeps an answer's gzip and brotli once made, and after a write that left its bytes alone", async () => {
    const db = stamps();
    const cache = new SnapshotCache(db.stamp);
    const list = JSON.stringify(Array.from({ length: 200 }, (_, i) => ({ name: `cluster-${i}` })));
    const first = await cache.get("list", async () => list);
    const gz = await first.encoded("gzip");
    expect(gunzipSync(gz).toString()).toBe(list);
    expect(brotliDecompressSync(await first.encoded("br")).toString()).toBe(list);
    expect(await first.encoded("gzip")).toBe(gz);
    db.write();
    let computed = 0;
    const again = await cache.get("list", async () => {
      computed++;
      return list;
    });
    expect(computed).toBe(1);
    expect(again).toBe(first);
    expect(await again.encoded("gzip")).toBe(gz);
    db.write();
    const changed = await cache.get("list", async () => `${list} `);
    expect(changed).not.toBe(first);
    expect(changed.etag).not.toBe(first.etag);
  });

  it("computes a key once for the requests that miss it together", async () => {
    const cache = new SnapshotCache(stamps().stamp);
    let computed = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((done) => (release = done));
    const produce = async () => {
      computed++;
      await gate;
      return "[1]";
    };
    const all = Promise.all([cache.get("k", produce), cache.get("k", produce), cache.get("k", produce)]);
    await new Promise((r) => setImmediate(r));
    release();
    const answers = await all;
    expect(computed).toBe(1);
    expect(new Set(answers).size).toBe(1);
  });

  it("holds at most its bytes, encodings counted, dropping the least recently used", async () => {
    const cache = new SnapshotCache(stamps().stamp, 10_000);
    const body = (c: string) => c.repeat(4_000);
    const a = await cache.get("a", async () => body("a"));
    await cache.get("b", async () => body("b"));
    expect(cache.bytes).toBe(8_000);
    await cache.get("a", async () => "recomputed");
    const encoded = (await a.encoded("gzip")).length;
    await new Promise((r) => setImmediate(r));
    expect(cache.bytes).toBe(8_000 + encoded);
    // c does not fit beside both: b, used least recently, goes.
    await cache.get("c", async () => body("c"));
    expect(cache.bytes).toBeLessThanOrEqual(10_000);
    expect(await text(cache, "a", async () => "recomputed")).toBe(body("a"));
    expect(await text(cache, "b", async () => "recomputed")).toBe("recomputed");
    // An answer bigger than the bound is served, not kept.
    expect(await text(cache, "big", async () => body("x").repeat(3))).toBe(body("x").repeat(3));
    expect(cache.bytes).toBeLessThanOrEqual(10_000);
    expect(await text(cache, "big", async () => "again")).toBe("again");
  });
});
