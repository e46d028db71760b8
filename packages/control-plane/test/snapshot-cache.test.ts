import { join } from "node:path";
import { openSqliteConnection, projects } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
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

  it("serves the same bytes while nothing was written (SQLite), recomputes after any write", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let calls = 0;
    const produce = async () => `v${++calls}`;
    expect(await cache.get("k", produce)).toBe("v1");
    // PostgreSQL has no change stamp (other replicas write too): every read is computed.
    expect(await cache.get("k", produce)).toBe(t.store.dialect === "sqlite" ? "v1" : "v2");
    await t.db.update(projects).set({ name: "renamed" }).where(projectsIdIs(t.otherProjectId));
    expect(await cache.get("k", produce)).toBe(t.store.dialect === "sqlite" ? "v2" : "v3");
  });

  it("recomputes after another process wrote to the database file", async () => {
    const cache = new SnapshotCache(t.store.changeStamp);
    let calls = 0;
    const produce = async () => `v${++calls}`;
    expect(await cache.get("k", produce)).toBe("v1");
    if (t.store.dialect === "sqlite") {
      expect(await cache.get("k", produce)).toBe("v1");
      // An operator's sqlite3 shell, say: a connection of its own, not the store's.
      const other = openSqliteConnection(join(t.dataDir, "keelson.sqlite"));
      try {
        other.prepare("update projects set name = 'elsewhere' where id = ?").run(t.otherProjectId);
      } finally {
        other.close();
      }
    }
    expect(await cache.get("k", produce)).toBe("v2");
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
