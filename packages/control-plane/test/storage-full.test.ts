import { clusters } from "@keelson/db";
import { type SQL, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";

/**
 * The store's storage full, made real on each dialect: SQLite with a page ceiling
 * (`max_page_count`), so its writes fail with SQLITE_FULL as on a full disk; PostgreSQL with a
 * trigger that raises `disk_full` (SQLSTATE 53100) as the server does when it cannot extend a
 * file. Each goes through the real driver, drizzle and the error handler. The tmpfs e2e test
 * (test/e2e/disk-full.test.ts) fills a real disk.
 */
async function fill(t: TestApp): Promise<void> {
  if (t.store.dialect === "sqlite") {
    const [pages] = await t.db.get<[number]>(sql`pragma page_count`);
    await t.db.run(sql.raw(`pragma max_page_count = ${pages + 2}`));
    return;
  }
  await pg(t)(
    sql.raw(`create or replace function keelson_test_disk_full() returns trigger language plpgsql as $$
      begin raise exception 'could not extend file "base/1/2": No space left on device' using errcode = 'disk_full'; end $$`),
  );
  await pg(t)(sql.raw("create trigger disk_full before insert on clusters execute function keelson_test_disk_full()"));
  // The probe's write (StorageCondition) is refused too while the disk is "full".
  await pg(t)(
    sql.raw("create trigger disk_full before update on keelson_schema execute function keelson_test_disk_full()"),
  );
}

async function free(t: TestApp): Promise<void> {
  if (t.store.dialect === "sqlite") await t.db.run(sql.raw("pragma max_page_count = 1073741823"));
  else {
    await pg(t)(sql.raw("drop trigger disk_full on clusters"));
    await pg(t)(sql.raw("drop trigger disk_full on keelson_schema"));
  }
}

function pg(t: TestApp): (q: SQL) => Promise<unknown> {
  const db = t.db as unknown as { execute(q: SQL): Promise<unknown> };
  return (q) => db.execute(q);
}

const create = (t: TestApp, name: string) =>
  t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name } });

/** Creates clusters until one is refused; returns the names taken and the refusal. */
async function createUntilRefused(t: TestApp) {
  const created: string[] = [];
  for (let i = 0; i < 500; i++) {
    const answer = await create(t, `c${i}`);
    if (answer.statusCode !== 200) return { created, refused: answer };
    created.push(`c${i}`);
  }
  throw new Error("500 creates and still room");
}

describe("storage full", () => {
  it("answers writes 507 storage_full, keeps reads, says so on /readyz, and takes writes again once there is room, losing nothing", async () => {
    // The probe would find room in the data dir (only the store is capped here): keep it out.
    const t = await createTestApp({ storageProbeIntervalMs: 600_000 });
    expect((await create(t, "before")).statusCode).toBe(200);
    await fill(t);

    // SQLite takes a few more rows in the pages it has; the first refused write is the answer.
    const { created: more, refused } = await createUntilRefused(t);
    const created = ["before", ...more];
    expect(refused.statusCode).toBe(507);
    expect(refused.json()).toEqual({
      code: "storage_full",
      message:
        t.store.dialect === "sqlite"
          ? `the data dir ${t.dataDir} is full; reads work, writes are refused until space is freed there`
          : "the database's disk is full; reads work, writes are refused until space is freed there",
    });

    const list = await t.request({ url: `/v4/${t.projectId}/clusters` });
    expect(list.statusCode).toBe(200);
    expect((list.json() as { name: string }[]).map((c) => c.name).sort()).toEqual([...created].sort());
    const degraded = await t.request({ url: "/readyz", token: null });
    expect(degraded.statusCode).toBe(200);
    expect(degraded.json()).toMatchObject({
      status: "degraded",
      conditions: [{ code: "storage_full", message: refused.json().message, since: expect.any(String) }],
    });

    await free(t);
    expect((await create(t, "after")).statusCode).toBe(200);
    expect((await t.request({ url: "/readyz", token: null })).json()).toMatchObject({
      status: "ready",
      conditions: [],
    });
    const names = (await t.db.select({ name: clusters.name }).from(clusters)).map((c) => c.name);
    expect(names.sort()).toEqual([...created, "after"].sort());
  });

  it("clears the condition by its probe once there is room, with no write asked for", async () => {
    const t = await createTestApp({ storageProbeIntervalMs: 100 });
    await fill(t);
    expect((await createUntilRefused(t)).refused.statusCode).toBe(507);
    const readiness = async () => (await t.request({ url: "/readyz", token: null })).json() as { status: string };
    if (t.store.dialect === "postgres") {
      // The probe's own write is refused while the database's disk is full.
      await new Promise((r) => setTimeout(r, 500));
      expect((await readiness()).status).toBe("degraded");
    }
    await free(t);
    const deadline = Date.now() + 5_000;
    while ((await readiness()).status !== "ready" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect((await readiness()).status).toBe("ready");
  });
});
