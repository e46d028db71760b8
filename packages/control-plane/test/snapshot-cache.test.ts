import { join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import {
  CLUSTER_CHANGES_RETENTION_MS,
  cloudProviders,
  clusterChangeStamp,
  clusterChanges,
  clusters,
  foldClusterChanges,
  nodes,
  openSqliteConnection,
  projects,
  pruneClusterChanges,
} from "@keelson/db";
import { eq, inArray } from "drizzle-orm";
import postgres from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { databaseFor } from "../../../test/support/postgres-database.ts";
import { getClusterViewUnless, listClusterViews, listClusterViewsPage } from "../src/domain/clusters/views.ts";
import { type Produced, SnapshotCache } from "../src/http/snapshot-cache.ts";
import { createTestApp, type TestApp } from "./helpers.ts";
import { insertCluster, insertHost, localPool } from "./node-fixtures.ts";

/** As routes/clusters.ts trusts a stamp. */
const MAX_AGE_MS = CLUSTER_CHANGES_RETENTION_MS / 2;

/** The stamp a project's cluster list is cached under (routes/clusters.ts). */
function listStamp(t: TestApp) {
  return () => clusterChangeStamp(t.db, t.projectId);
}

/** A cache whose every key is read under one stamp, as the tests below need. */
function cacheOn(stamp: () => Promise<string>, maxBytes?: number) {
  const cache = new SnapshotCache({ maxBytes, maxAgeMs: MAX_AGE_MS });
  return {
    get: (key: string, produce: () => Promise<Produced>) => cache.get(key, stamp, produce),
    get bytes() {
      return cache.bytes;
    },
  };
}

type Cache = ReturnType<typeof cacheOn>;

/** The cached answer's body as text. */
async function text(cache: Cache, key: string, produce: () => Promise<string>): Promise<string> {
  return (await cache.get(key, produce)).body.toString();
}

describe("SnapshotCache", () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await createTestApp({ runOperations: false });
  });
  afterEach(async () => t.close());

  /** A write by a connection that is not the store's: an operator's SQL shell, another replica. */
  async function writeElsewhere(statement: string, ...params: string[]): Promise<void> {
    if (t.store.dialect === "sqlite") {
      const other = openSqliteConnection(join(t.dataDir, "keelson.sqlite"));
      try {
        other.prepare(statement.replace(/\$\d/g, "?")).run(...params);
      } finally {
        other.close();
      }
      return;
    }
    const other = postgres(await databaseFor(t.dataDir), { max: 1, onnotice: () => {} });
    try {
      await other.unsafe(statement, params);
    } finally {
      await other.end({ timeout: 1 });
    }
  }

  /** A counting producer: `v1`, `v2`, … one per computation. */
  function counting() {
    const state = { calls: 0, produce: async () => `v${++state.calls}` };
    return state;
  }

  it("serves the same bytes while nothing was written, recomputes after a change to the cluster records", async () => {
    const cache = cacheOn(listStamp(t));
    const c = counting();
    expect(await text(cache, "k", c.produce)).toBe("v1");
    expect(await text(cache, "k", c.produce)).toBe("v1");
    await insertCluster(t.db, t.projectId, "c1");
    expect(await text(cache, "k", c.produce)).toBe("v2");
  });

  it("keeps its answers through the writes a rollout makes all the time, drops them when a record's column changes", async () => {
    const cache = cacheOn(listStamp(t));
    const clusterId = await insertCluster(t.db, t.projectId, "c1");
    const host = await insertHost(t.db, t.projectId, { name: "n1", clusterId, status: "ok", agentConnected: 1 });
    const c = counting();
    expect(await text(cache, "k", c.produce)).toBe("v1");
    // Heartbeats, phase reports, a status written again unchanged, events, another table: no
    // column the cluster records show.
    await t.db.update(nodes).set({ lastSeen: new Date().toISOString(), phases: [] }).where(eq(nodes.id, host.id));
    await t.db.update(nodes).set({ status: "ok", agentConnected: 1 }).where(eq(nodes.id, host.id));
    await t.db.update(projects).set({ name: "renamed" }).where(eq(projects.id, t.otherProjectId));
    expect(await text(cache, "k", c.produce)).toBe("v1");
    for (const [i, change] of [
      { status: "converging" },
      { agentConnected: 0 },
      { apiResponding: 1 },
      { isMaster: 1 },
      { clusterId: null },
    ].entries()) {
      await t.db.update(nodes).set(change).where(eq(nodes.id, host.id));
      expect(await text(cache, "k", c.produce), JSON.stringify(change)).toBe(`v${i + 2}`);
    }
    // The host left its cluster above: deleting it changes no cluster's record; a new node does.
    await t.db.delete(nodes).where(eq(nodes.id, host.id));
    expect(await text(cache, "k", c.produce)).toBe("v6");
    await insertHost(t.db, t.projectId, { name: "n2", clusterId });
    expect(await text(cache, "k", c.produce)).toBe("v7");
  });

  it("drops only what a change shows in: that cluster's record and its project's list", async () => {
    const cache = new SnapshotCache({ maxAgeMs: MAX_AGE_MS });
    const [c1, c2] = [await insertCluster(t.db, t.projectId, "c1"), await insertCluster(t.db, t.projectId, "c2")];
    const other = await insertCluster(t.db, t.otherProjectId, "o1");
    const { providerId } = await localPool(t.db, t.projectId);
    const reads = {
      list: () => clusterChangeStamp(t.db, t.projectId),
      c1: () => clusterChangeStamp(t.db, t.projectId, c1),
      c2: () => clusterChangeStamp(t.db, t.projectId, c2),
      otherList: () => clusterChangeStamp(t.db, t.otherProjectId),
    };
    const computed: string[] = [];
    const readAll = async () => {
      for (const [key, stamp] of Object.entries(reads))
        await cache.get(key, stamp, async () => {
          computed.push(key);
          return `${key}@${computed.length}`;
        });
    };
    await readAll();
    computed.length = 0;
    await t.db.update(clusters).set({ name: "c1-renamed" }).where(eq(clusters.id, c1));
    await readAll();
    expect(computed).toEqual(["list", "c1"]);
    computed.length = 0;
    await insertHost(t.db, t.projectId, { name: "n2", clusterId: c2 });
    await readAll();
    expect(computed).toEqual(["list", "c2"]);
    computed.length = 0;
    await t.db.update(clusters).set({ name: "o1-renamed" }).where(eq(clusters.id, other));
    await readAll();
    expect(computed).toEqual(["otherList"]);
    // A provider's name shows in every cluster of its project.
    computed.length = 0;
    await t.db.update(cloudProviders).set({ name: "renamed" }).where(eq(cloudProviders.id, providerId));
    await readAll();
    expect(computed).toEqual(["list", "c1", "c2"]);
  });

  it("moves both clusters' stamps when a node moves between them", async () => {
    const [c1, c2] = [await insertCluster(t.db, t.projectId, "c1"), await insertCluster(t.db, t.projectId, "c2")];
    const host = await insertHost(t.db, t.projectId, { name: "n1", clusterId: c1 });
    const before = [await clusterChangeStamp(t.db, t.projectId, c1), await clusterChangeStamp(t.db, t.projectId, c2)];
    await t.db.update(nodes).set({ clusterId: c2 }).where(eq(nodes.id, host.id));
    const after = [await clusterChangeStamp(t.db, t.projectId, c1), await clusterChangeStamp(t.db, t.projectId, c2)];
    expect(after[0]).not.toBe(before[0]);
    expect(after[1]).not.toBe(before[1]);
  });

  it("logs a batch of node changes once per transaction and cluster on PostgreSQL (a row per node on SQLite)", async () => {
    const [c1, c2] = [await insertCluster(t.db, t.projectId, "c1"), await insertCluster(t.db, t.projectId, "c2")];
    const hosts: string[] = [];
    for (const [i, clusterId] of [c1, c1, c1, c2].entries())
      hosts.push((await insertHost(t.db, t.projectId, { name: `n${i}`, clusterId, status: "ok" })).id);
    const rowsOf = async (clusterId: string) =>
      (await t.db.select().from(clusterChanges).where(eq(clusterChanges.clusterId, clusterId))).length;
    const before = {
      c1: await rowsOf(c1),
      c2: await rowsOf(c2),
      stamp: await clusterChangeStamp(t.db, t.projectId, c1),
    };
    // One statement (a batch of reports) changing three nodes of c1 and one of c2.
    await t.db.update(nodes).set({ status: "converging" }).where(inArray(nodes.id, hosts));
    const once = t.store.dialect === "postgres";
    expect((await rowsOf(c1)) - before.c1).toBe(once ? 1 : 3);
    expect((await rowsOf(c2)) - before.c2).toBe(1);
    const stamp = await clusterChangeStamp(t.db, t.projectId, c1);
    expect(stamp).not.toBe(before.stamp);
    // The next transaction logs again, and a transaction rolled back logs nothing.
    await t.db
      .update(nodes)
      .set({ status: "ok" })
      .where(inArray(nodes.id, hosts.slice(0, 2)));
    expect((await rowsOf(c1)) - before.c1).toBe(once ? 2 : 5);
    expect(await clusterChangeStamp(t.db, t.projectId, c1)).not.toBe(stamp);
    await expect(
      t.db.transaction(async (tx) => {
        await tx.update(nodes).set({ status: "failed" }).where(inArray(nodes.id, hosts));
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    expect((await rowsOf(c1)) - before.c1).toBe(once ? 2 : 5);
  });

  it("recomputes after another connection changed the cluster records", async () => {
    const cache = cacheOn(listStamp(t));
    const { providerId, poolId } = await localPool(t.db, t.projectId);
    const c = counting();
    expect(await text(cache, "k", c.produce)).toBe("v1");
    await writeElsewhere("update cloud_providers set name = $1 where id = $2", "renamed", providerId);
    expect(await text(cache, "k", c.produce)).toBe("v2");
    await writeElsewhere("update node_pools set name = $1 where id = $2", "renamed", poolId);
    expect(await text(cache, "k", c.produce)).toBe("v3");
    await writeElsewhere("update projects set name = $1 where id = $2", "renamed", t.otherProjectId);
    expect(await text(cache, "k", c.produce)).toBe("v3");
  });

  it("keeps stamps apart across a prune of the log", async () => {
    const stamp = listStamp(t);
    await insertCluster(t.db, t.projectId, "c1");
    const before = await stamp();
    // A cutoff a second ahead: every row goes.
    expect(await pruneClusterChanges(t.db, -1000)).toBeGreaterThan(0);
    const pruned = await stamp();
    expect(pruned).not.toBe(before);
    await insertCluster(t.db, t.projectId, "c2");
    expect(await stamp()).not.toBe(pruned);
  });

  it("reads whole an answer whose stamp was last confirmed longer ago than the log keeps a row", async () => {
    // A clock the test moves: the minute the log keeps its rows passes in a step.
    let clock = 0;
    const cache = new SnapshotCache({ maxAgeMs: MAX_AGE_MS, now: () => clock });
    const c1 = await insertCluster(t.db, t.projectId, "c1");
    // Nothing of c1 left in the log: its stamp is the empty log's.
    await pruneClusterChanges(t.db, -1000);
    const read = (key: string) =>
      cache.unless(key, async (known) => {
        const { stamp, view } = await getClusterViewUnless(t.db, t.app.keelson.catalogue, t.projectId, c1, known);
        return { stamp, produced: view?.row.name };
      });
    const list = async () =>
      (
        await cache.get("list", listStamp(t), async () =>
          (await listClusterViews(t.db, t.app.keelson.catalogue, t.projectId)).value.map((v) => v.row.name).join(","),
        )
      ).body.toString();
    expect((await read("c1")).body.toString()).toBe("c1");
    expect(await list()).toBe("c1");
    // Read again within the age: confirmed, kept.
    clock += MAX_AGE_MS - 1;
    expect((await read("c1")).body.toString()).toBe("c1");
    expect(await list()).toBe("c1");
    // A rename, then a minute with no read: its row is pruned, and the stamp is what it was.
    const stampBefore = await clusterChangeStamp(t.db, t.projectId, c1);
    await t.db.update(clusters).set({ name: "c1-renamed" }).where(eq(clusters.id, c1));
    clock += CLUSTER_CHANGES_RETENTION_MS + 1;
    await pruneClusterChanges(t.db, -1000);
    expect(await clusterChangeStamp(t.db, t.projectId, c1)).toBe(stampBefore);
    expect((await read("c1")).body.toString()).toBe("c1-renamed");
    expect(await list()).toBe("c1-renamed");
  });

  it("folds each cluster's older rows into one, every stamp unchanged, and keeps stamps apart after", async () => {
    const [c1, c2] = [await insertCluster(t.db, t.projectId, "c1"), await insertCluster(t.db, t.projectId, "c2")];
    for (const name of ["a", "b", "c"]) await t.db.update(clusters).set({ name }).where(eq(clusters.id, c1));
    const { providerId } = await localPool(t.db, t.projectId);
    for (const name of ["p1", "p2"])
      await t.db.update(cloudProviders).set({ name }).where(eq(cloudProviders.id, providerId));
    const stamps = async () => ({
      list: await clusterChangeStamp(t.db, t.projectId),
      c1: await clusterChangeStamp(t.db, t.projectId, c1),
      c2: await clusterChangeStamp(t.db, t.projectId, c2),
    });
    const rows = async () => (await t.db.select().from(clusterChanges)).length;
    const before = await stamps();
    const rowsBefore = await rows();
    // Rows younger than the default second stay as they are.
    expect(await foldClusterChanges(t.db)).toBe(0);
    // A cutoff a second ahead: every group of several rows folds (c1's four, the project's two).
    expect(await foldClusterChanges(t.db, -1000)).toBe(6);
    expect(await rows()).toBe(rowsBefore - 6 + 2);
    expect(await stamps()).toEqual(before);
    const c1Rows = await t.db.select().from(clusterChanges).where(eq(clusterChanges.clusterId, c1));
    expect(c1Rows).toHaveLength(1);
    expect(c1Rows[0]?.folded).toBe(4);
    // Folding again changes nothing; a change after a fold moves the stamp, and folds into it.
    expect(await foldClusterChanges(t.db, -1000)).toBe(0);
    await t.db.update(clusters).set({ name: "d" }).where(eq(clusters.id, c1));
    const changed = await stamps();
    expect(changed.c1).not.toBe(before.c1);
    expect(changed.list).not.toBe(before.list);
    expect(changed.c2).toBe(before.c2);
    expect(await foldClusterChanges(t.db, -1000)).toBe(2);
    expect(await stamps()).toEqual(changed);
    // A prune takes folded rows like any other: the stamps move, apart from every earlier one.
    await pruneClusterChanges(t.db, -1000);
    const pruned = await stamps();
    expect(pruned.c1).not.toBe(changed.c1);
    expect(pruned.c1).not.toBe(before.c1);
    await t.db.update(clusters).set({ name: "e" }).where(eq(clusters.id, c1));
    expect(await clusterChangeStamp(t.db, t.projectId, c1)).not.toBe(pruned.c1);
  });

  it("keeps its answers through a fold, and two folds at once fold each row once", async () => {
    const cache = new SnapshotCache({ maxAgeMs: MAX_AGE_MS });
    const c1 = await insertCluster(t.db, t.projectId, "c1");
    for (const name of ["a", "b", "c"]) await t.db.update(clusters).set({ name }).where(eq(clusters.id, c1));
    let computed = 0;
    const read = () =>
      cache.unless("c1", async (known) => {
        const { stamp, view } = await getClusterViewUnless(t.db, t.app.keelson.catalogue, t.projectId, c1, known);
        if (view) computed++;
        return { stamp, produced: view?.row.name };
      });
    expect((await read()).body.toString()).toBe("c");
    const stamp = await clusterChangeStamp(t.db, t.projectId, c1);
    // On PostgreSQL the two run on two pooled connections.
    const folded = await Promise.all([foldClusterChanges(t.db, -1000), foldClusterChanges(t.db, -1000)]);
    expect(folded[0] + folded[1]).toBe(4);
    expect(await clusterChangeStamp(t.db, t.projectId, c1)).toBe(stamp);
    expect((await read()).body.toString()).toBe("c");
    expect(computed).toBe(1);
  });

  it("does not keep a value whose computation wrote to the database", async () => {
    const cache = cacheOn(listStamp(t));
    const { providerId } = await localPool(t.db, t.projectId);
    let n = 0;
    const writing = async () => {
      await t.db
        .update(cloudProviders)
        .set({ name: `w${++n}` })
        .where(eq(cloudProviders.id, providerId));
      return `w${n}`;
    };
    expect(await text(cache, "k", writing)).toBe("w1");
    expect(await text(cache, "k", writing)).toBe("w2");
  });

  it("never files a value under a newer stamp another request saw meanwhile (stamp reads answered out of order)", async () => {
    // Stamps as a pool may answer them: A's second read was taken before B's first, and
    // answers after it.
    const answers = ["S1", "S2", "S2", "S1", "S2"];
    const cache = cacheOn(async () => answers.shift() as string);
    let releaseA: () => void = () => {};
    const a = text(cache, "k", () => new Promise<string>((done) => (releaseA = () => done("computed at S1"))));
    await new Promise((r) => setImmediate(r));
    expect(await text(cache, "k", async () => "computed at S2")).toBe("computed at S2");
    releaseA();
    expect(await a).toBe("computed at S1");
    expect(await text(cache, "k", async () => "recomputed")).toBe("computed at S2");
  });

  it("brings with each cluster read the stamp of what it read, the same as the log's stamp", async () => {
    const [c1] = [await insertCluster(t.db, t.projectId, "c1"), await insertCluster(t.db, t.projectId, "c2")];
    const catalogue = t.app.keelson.catalogue;
    const expectSame = async () => {
      const record = await getClusterViewUnless(t.db, catalogue, t.projectId, c1, undefined);
      expect(record.stamp).toBe(await clusterChangeStamp(t.db, t.projectId, c1));
      expect(record.view?.row.name).toMatch(/^c1/);
      // Under the stamp it was read with, the record is not read again; under another it is.
      expect(await getClusterViewUnless(t.db, catalogue, t.projectId, c1, record.stamp)).toEqual({
        stamp: record.stamp,
      });
      expect((await getClusterViewUnless(t.db, catalogue, t.projectId, c1, "not a stamp")).view).toEqual(record.view);
      const list = await listClusterViews(t.db, catalogue, t.projectId);
      expect(list.stamp).toBe(await clusterChangeStamp(t.db, t.projectId));
      const page = await listClusterViewsPage(t.db, catalogue, t.projectId, { limit: 1 });
      expect(page.stamp).toBe(list.stamp);
      return list.stamp;
    };
    const before = await expectSame();
    await t.db.update(clusters).set({ name: "c1-renamed" }).where(eq(clusters.id, c1));
    expect(await expectSame()).not.toBe(before);
    // Pruned to nothing: the sum of no ids.
    await pruneClusterChanges(t.db, -1000);
    expect(await expectSame()).toBe("0:0");
    // An empty list has no row to carry a stamp: its value is checked against the log again.
    expect((await listClusterViews(t.db, catalogue, t.otherProjectId)).stamp).toBeUndefined();
    // No such cluster: 404 whatever the stamp.
    for (const known of [undefined, "not a stamp"]) {
      await expect(getClusterViewUnless(t.db, catalogue, t.otherProjectId, c1, known)).rejects.toMatchObject({
        statusCode: 404,
      });
    }
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
    const cache = cacheOn(db.stamp);
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

  it("files a value that brings the stamp of its own snapshot without a second look, only under the stamp seen before", async () => {
    let looks = 0;
    let n = 0;
    const cache = cacheOn(async () => {
      looks++;
      return `s${n}`;
    });
    await cache.get("k", async () => ({ text: "a", stamp: "s0" }));
    expect(looks).toBe(1);
    expect(await text(cache, "k", async () => "recomputed")).toBe("a");
    expect(looks).toBe(2);
    // A write between the look at the log and the read: what was read is newer than s1.
    n++;
    const read = await cache.get("k", async () => {
      n++;
      return { text: "b", stamp: `s${n}` };
    });
    expect(read.body.toString()).toBe("b");
    expect(looks).toBe(3);
    expect(await text(cache, "k", async () => "c")).toBe("c");
  });

  it("reads a record and its stamp in one look: the kept answer while the stamp stands, the new one after", async () => {
    const cache = new SnapshotCache({ maxAgeMs: MAX_AGE_MS });
    let n = 0;
    const knowns: (string | undefined)[] = [];
    const read = async (known: string | undefined) => {
      knowns.push(known);
      const stamp = `s${n}`;
      return stamp === known ? { stamp } : { stamp, produced: `v${n}` };
    };
    const first = await cache.unless("k", read);
    expect(first.body.toString()).toBe("v0");
    expect(await cache.unless("k", read)).toBe(first);
    n++;
    expect((await cache.unless("k", read)).body.toString()).toBe("v1");
    expect(knowns).toEqual([undefined, "s0", "s0"]);
    // The kept answer went (a bound, another request) between the look and its answer: read whole.
    const racing = new SnapshotCache({ maxBytes: 3, maxAgeMs: MAX_AGE_MS });
    await racing.unless("k", read);
    const looks = knowns.length;
    const evicting = async (known: string | undefined) => {
      if (!known) return read(known);
      // A larger answer filed meanwhile pushes "k" out of the 3-byte bound.
      await racing.unless("big", async () => ({ stamp: "x", produced: "xxxx" }));
      return { stamp: known };
    };
    expect((await racing.unless("k", evicting)).body.toString()).toBe("v1");
    expect(knowns.slice(looks)).toEqual([undefined]);
  });

  it("computes a key once for the requests that miss it together", async () => {
    const cache = cacheOn(stamps().stamp);
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
    const cache = cacheOn(stamps().stamp, 10_000);
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
