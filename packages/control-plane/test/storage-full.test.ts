import { clusters } from "@keelson/db";
import { describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";
import { fillStore, freeStore } from "./storage-fill.ts";

/** Where the store is made full (see storage-fill.ts); keelson_schema: the probe's write on PostgreSQL. */
const TABLES = ["clusters", "keelson_schema"];
const fill = (t: TestApp) => fillStore(t, TABLES);
const free = (t: TestApp) => freeStore(t, TABLES);

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
