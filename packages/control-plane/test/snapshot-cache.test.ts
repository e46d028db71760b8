import { join } from "node:path";
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
      const first = await cache.get("k", produce);
      const second = await cache.get("k", produce);
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
    expect(await cache.get("k", produce)).toBe(`v${before + 1}`);
  });

  it("recomputes after another connection wrote to the database", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let calls = 0;
    const produce = async () => `v${++calls}`;
    expect(await servedTwice(cache, produce)).toBe(true);
    const before = calls;
    await writeElsewhere("elsewhere");
    expect(await cache.get("k", produce)).toBe(`v${before + 1}`);
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
    expect(await cache.get("k", writing)).toBe("w1");
    expect(await cache.get("k", writing)).toBe("w2");
  });

  it("never files a value under a newer stamp another request saw meanwhile (stamp reads answered out of order)", async () => {
    // Stamps as a pool may answer them: A's second read was taken before B's first, and
    // answers after it.
    const answers = ["S1", "S2", "S2", "S1", "S2"];
    const cache = new SnapshotCache(async () => answers.shift() as string);
    let releaseA: () => void = () => {};
    const a = cache.get("k", () => new Promise<string>((done) => (releaseA = () => done("computed at S1"))));
    await new Promise((r) => setImmediate(r));
    expect(await cache.get("k", async () => "computed at S2")).toBe("computed at S2");
    releaseA();
    expect(await a).toBe("computed at S1");
    expect(await cache.get("k", async () => "recomputed")).toBe("computed at S2");
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
