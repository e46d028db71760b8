import { clusters, firstRow, operations } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { AwsStandin } from "../../../test/aws-standin/server.ts";
import { appWithAwsAccount, awsClusterBody } from "./aws-app-fixtures.ts";
import type { TestApp } from "./helpers.ts";

/**
 * Update of an auto-deployed (AWS) cluster's worker counts: bad values are a 400 naming the
 * field with nothing recorded; while the create still runs it is a 409; afterwards a change of
 * numWorkers (autoscaler off) or of numMin/MaxWorkers (on) records the resize operation, and
 * any other change stays a plain update. Operations do not run here.
 */
let t: TestApp;
let standin: AwsStandin;
let pool: string;
afterEach(async () => {
  await t?.close();
  await standin?.close();
});

async function start() {
  ({ t, standin, pool } = await appWithAwsAccount({ runOperations: false }));
}

async function createAws(extra: Record<string, unknown> = {}): Promise<string> {
  const res = await t.request({
    method: "POST",
    url: `/v4/${t.projectId}/clusters`,
    payload: awsClusterBody(pool, extra),
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().uuid;
}

const put = (id: string, payload: object, version = "v4") =>
  t.request({ method: "PUT", url: `/${version}/${t.projectId}/clusters/${id}`, payload });
const opsOf = async (id: string, kind: string) =>
  await t.db
    .select()
    .from(operations)
    .where(and(eq(operations.targetId, id), eq(operations.kind, kind)));
const finishCreate = (id: string) =>
  t.db.update(operations).set({ state: "succeeded" }).where(eq(operations.targetId, id));
const specOf = async (id: string) => firstRow(await t.db.select().from(clusters).where(eq(clusters.id, id)))?.spec;

describe("resizing an AWS auto-deployed cluster", () => {
  it("answers 400 naming the field for bad counts and 409 while the create runs, recording nothing", async () => {
    await start();
    const id = await createAws();
    for (const [payload, field] of [
      [{ numWorkers: -1 }, "numWorkers"],
      [{ numWorkers: "three" }, "numWorkers"],
    ] as const) {
      const res = await put(id, payload);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().field).toBe(field);
    }
    const busy = await put(id, { numWorkers: 3 });
    expect(busy.statusCode, busy.body).toBe(409);
    expect(busy.json().code).toBe("cluster_busy");
    expect(await opsOf(id, "cluster.aws-resize")).toEqual([]);
    expect((await specOf(id))?.numWorkers).toBe(2);

    const cas = await createAws({ name: "auto-2", enableCAS: true, numMinWorkers: 1, numMaxWorkers: 4 });
    await finishCreate(cas);
    const reversed = await put(cas, { numMinWorkers: 5, numMaxWorkers: 2 }, "v3");
    expect(reversed.statusCode, reversed.body).toBe(400);
    expect(reversed.json().field).toBe("numMinWorkers");
    expect(await opsOf(cas, "cluster.aws-resize")).toEqual([]);
    expect(await specOf(cas)).toMatchObject({ numMinWorkers: 1, numMaxWorkers: 4 });
  });

  it("records the resize for numWorkers (autoscaler off) and the bounds (on); other changes stay updates", async () => {
    await start();
    const id = await createAws();
    await finishCreate(id);
    const grow = await put(id, { numWorkers: 4 });
    expect(grow.statusCode, grow.body).toBe(200);
    expect(await opsOf(id, "cluster.aws-resize")).toMatchObject([
      { state: "pending", params: { changed: ["numWorkers"] } },
    ]);
    expect((await specOf(id))?.numWorkers).toBe(4);

    // The first resize has not run: a second one waits its turn.
    expect((await put(id, { numWorkers: 1 })).statusCode).toBe(409);
    await finishCreate(id);
    const other = await put(id, { tags: { team: "a" } });
    expect(other.statusCode, other.body).toBe(200);
    expect(await opsOf(id, "cluster.update")).toHaveLength(1);
    expect(await opsOf(id, "cluster.aws-resize")).toHaveLength(1);

    const cas = await createAws({ name: "auto-2", enableCAS: true, numMinWorkers: 1, numMaxWorkers: 4 });
    await finishCreate(cas);
    // numWorkers does not apply while the autoscaler is on: ignored, so no resize.
    expect((await put(cas, { numWorkers: 9 }, "v3")).statusCode).toBe(200);
    expect(await opsOf(cas, "cluster.aws-resize")).toEqual([]);
    const bounds = await put(cas, { numMinWorkers: 2, numMaxWorkers: 6 }, "v3");
    expect(bounds.statusCode, bounds.body).toBe(200);
    expect(await opsOf(cas, "cluster.aws-resize")).toMatchObject([
      { params: { changed: expect.arrayContaining(["numMinWorkers", "numMaxWorkers"]) } },
    ]);
  });
});
