import { clusters, firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";

const waitFor = async (check: () => Promise<boolean> | boolean, timeoutMs = 5000) => {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not met in time");
};

describe.each(["v4", "v3"] as const)("clusters %s", (version) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await createTestApp();
  });
  afterEach(async () => t.close());

  const base = () => `/${version}/${t.projectId}/clusters`;
  const create = (payload: unknown, url = base()) => t.request({ method: "POST", url, payload: payload as object });

  it("creates a manual-deploy cluster that settles at pending/success", async () => {
    const res = await create({ name: "alpha" });
    expect(res.statusCode).toBe(200);
    const { uuid } = res.json();
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.location).toBe(`${base()}/${uuid}`);
    await t.app.keelson.runner.idle();
    const got = await t.request({ method: "GET", url: `${base()}/${uuid}` });
    expect(got.statusCode).toBe(200);
    const body = got.json();
    expect(body).toMatchObject({
      uuid,
      name: "alpha",
      projectId: t.projectId,
      status: "pending",
      taskStatus: "success",
    });
    expect(body.cloudProviderType).toBe("local");
    expect(body.k8sApiPort).toBe("443");
    expect(body.networkPlugin).toBe("flannel");
    expect(body.masterVipVrouterId).toBe("");
    const list = await t.request({ method: "GET", url: base() });
    expect(list.json().map((c: { uuid: string }) => c.uuid)).toEqual([uuid]);
  });

  it("records create, update and delete as operations that finish", async () => {
    const { uuid } = (await create({ name: "ops" })).json();
    await t.app.keelson.runner.idle();
    const put = await t.request({ method: "PUT", url: `${base()}/${uuid}`, payload: { certExpiryHrs: 48 } });
    expect(put.statusCode).toBe(200);
    expect(put.body).toBe("");
    await t.app.keelson.runner.idle();
    expect((await t.request({ method: "GET", url: `${base()}/${uuid}` })).json().certExpiryHrs).toBe(48);
    const del = await t.request({ method: "DELETE", url: `${base()}/${uuid}` });
    expect(del.statusCode).toBe(200);
    expect(del.body).toBe("");
    await t.app.keelson.runner.idle();
    expect((await t.request({ method: "GET", url: `${base()}/${uuid}` })).statusCode).toBe(404);
    const ops = (await t.request({ method: "GET", url: `/v4/${t.projectId}/operations?target=${uuid}` })).json();
    expect(ops.map((o: { kind: string; state: string }) => `${o.kind}:${o.state}`).sort()).toEqual([
      "cluster.create:succeeded",
      "cluster.delete:succeeded",
      "cluster.update:succeeded",
    ]);
  });

  it("keeps a cluster's place in the list and its creation time when it is updated", async () => {
    const first = (await create({ name: "first" })).json().uuid as string;
    const second = (await create({ name: "second" })).json().uuid as string;
    await t.app.keelson.runner.idle();
    const createdAt = async () => firstRow(await t.db.select().from(clusters).where(eq(clusters.id, first)))?.createdAt;
    const before = await createdAt();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const put = await t.request({ method: "PUT", url: `${base()}/${first}`, payload: { certExpiryHrs: 48 } });
    expect(put.statusCode).toBe(200);
    await t.app.keelson.runner.idle();
    expect(await createdAt()).toBe(before);
    const row = firstRow(await t.db.select().from(clusters).where(eq(clusters.id, first)));
    expect((row?.updatedAt ?? "") > (row?.createdAt ?? "")).toBe(true);
    const list = await t.request({ method: "GET", url: base() });
    expect(list.json().map((c: { uuid: string }) => c.uuid)).toEqual([first, second]);
  });

  it("shows deleting while the delete operation has not run", async () => {
    await t.close();
    t = await createTestApp({ runOperations: false });
    const { uuid } = (await create({ name: "slow" })).json();
    expect((await t.request({ method: "DELETE", url: `${base()}/${uuid}` })).statusCode).toBe(200);
    const body = (await t.request({ method: "GET", url: `${base()}/${uuid}` })).json();
    expect(body.status).toBe("deleting");
    expect(body.taskStatus).toBe("deleting");
    // A second delete or an update of a cluster being deleted is a conflict, not a second operation.
    expect((await t.request({ method: "DELETE", url: `${base()}/${uuid}` })).statusCode).toBe(409);
    expect(
      (await t.request({ method: "PUT", url: `${base()}/${uuid}`, payload: { certExpiryHrs: 2 } })).statusCode,
    ).toBe(409);
  });

  it("refuses a duplicate name with 409 and stores nothing", async () => {
    expect((await create({ name: "dup" })).statusCode).toBe(200);
    const again = await create({ name: "dup" });
    expect(again.statusCode).toBe(409);
    expect(again.json().code).toBe("duplicate_name");
    expect((await t.request({ method: "GET", url: base() })).json()).toHaveLength(1);
  });

  it("answers 400 naming the field for invalid input and stores nothing", async () => {
    const res = await create({ name: "bad", networkPlugin: "cilium" });
    expect(res.statusCode).toBe(400);
    expect(res.json().field).toBe("networkPlugin");
    const notObject = await t.request({
      method: "POST",
      url: base(),
      payload: "[1,2]",
      headers: { "content-type": "application/json" },
    });
    expect(notObject.statusCode).toBe(400);
    expect((await t.request({ method: "GET", url: base() })).json()).toHaveLength(0);
    expect(await t.db.select().from(operations)).toHaveLength(0);
  });

  it("answers 400 naming an unknown node in masterNodes", async () => {
    const res = await create({ name: "withnodes", masterNodes: ["0b8f7f4e-0000-4000-8000-000000000000"] });
    expect(res.statusCode).toBe(400);
    expect(res.json().field).toBe("masterNodes[0]");
    expect(res.json().message).toContain("0b8f7f4e-0000-4000-8000-000000000000");
  });

  it("chooses a VRRP router id when masterVipIpv4 is set, unique across clusters", async () => {
    const a = (await create({ name: "vip-a", masterVipIpv4: "10.0.0.10", masterVipIface: "eth0" })).json().uuid;
    const b = (await create({ name: "vip-b", masterVipIpv4: "10.0.0.11", masterVipIface: "eth0" })).json().uuid;
    const ra = (await t.request({ method: "GET", url: `${base()}/${a}` })).json().masterVipVrouterId;
    const rb = (await t.request({ method: "GET", url: `${base()}/${b}` })).json().masterVipVrouterId;
    for (const id of [ra, rb]) {
      expect(typeof id).toBe("string");
      expect(Number(id)).toBeGreaterThanOrEqual(0);
      expect(Number(id)).toBeLessThanOrEqual(254);
    }
    expect(ra).not.toBe(rb);
  });

  it("answers 404 for unknown clusters on read, update and delete", async () => {
    const url = `${base()}/00000000-0000-4000-8000-000000000000`;
    for (const method of ["GET", "PUT", "DELETE"] as const) {
      const res = await t.request({ method, url, ...(method === "PUT" ? { payload: {} } : {}) });
      expect(res.statusCode, method).toBe(404);
      expect(res.json().code).toBe("not_found");
    }
  });

  it("answers 403 without a token and with another project's token", async () => {
    const { uuid } = (await create({ name: "private" })).json();
    for (const token of [null, "nope", t.otherToken]) {
      for (const [method, url] of [
        ["GET", base()],
        ["POST", base()],
        ["GET", `${base()}/${uuid}`],
        ["PUT", `${base()}/${uuid}`],
        ["DELETE", `${base()}/${uuid}`],
      ] as const) {
        const res = await t.request({
          method,
          url,
          token,
          ...(method === "POST" || method === "PUT" ? { payload: { name: "x" } } : {}),
        });
        expect(res.statusCode, `${method} ${url} token=${token}`).toBe(403);
        expect(res.json().code).toBe("forbidden");
      }
    }
  });

  it("warns about fields the version does not take, and refuses them with fieldValidation=Strict", async () => {
    const res = await create({ name: "warned", status: "ok", noSuchField: 1 });
    expect(res.statusCode).toBe(200);
    const warning = String(res.headers.warning);
    expect(warning).toContain("status");
    expect(warning).toContain("noSuchField");
    const strict = await create({ name: "strict", noSuchField: 1 }, `${base()}?fieldValidation=Strict`);
    expect(strict.statusCode).toBe(400);
    expect(strict.json().field).toBe("noSuchField");
    const names = (await t.request({ method: "GET", url: base() })).json().map((c: { name: string }) => c.name);
    expect(names).toEqual(["warned"]);
  });
});

describe("operations survive a restart", () => {
  it("resumes an unfinished create after the server restarts on the same data", async () => {
    const first = await createTestApp({ runOperations: false });
    const { uuid } = (
      await first.request({ method: "POST", url: `/v4/${first.projectId}/clusters`, payload: { name: "resume" } })
    ).json();
    const before = (await first.request({ method: "GET", url: `/v4/${first.projectId}/clusters/${uuid}` })).json();
    expect(before.taskStatus).toBe("creating");
    const pending = firstRow(await first.db.select().from(operations).where(eq(operations.targetId, uuid)));
    expect(pending?.state).toBe("pending");
    await first.close(true);

    const second = await createTestApp({ dataDir: first.dataDir });
    try {
      // The create's last step settles the cluster; the runner records the operation's end just
      // after it: wait for both.
      await waitFor(async () => {
        const c = (await second.request({ method: "GET", url: `/v4/${second.projectId}/clusters/${uuid}` })).json();
        return c.taskStatus === "success";
      });
      await second.app.keelson.runner.idle();
      const op = firstRow(await second.db.select().from(operations).where(eq(operations.targetId, uuid)));
      expect(op?.state).toBe("succeeded");
      expect(op?.attempts).toBe(1);
      const after = (await second.request({ method: "GET", url: `/v4/${second.projectId}/clusters/${uuid}` })).json();
      expect(after.status).toBe("pending");
    } finally {
      await second.close();
    }
  });

  it("resumes a running delete from its saved cursor", async () => {
    const first = await createTestApp();
    const { uuid } = (
      await first.request({ method: "POST", url: `/v4/${first.projectId}/clusters`, payload: { name: "halfway" } })
    ).json();
    await first.app.keelson.runner.idle();
    await first.close(true);
    // Simulate a crash after the delete's first step: the operation is `running` with its cursor at step 1.
    const crashed = await createTestApp({ dataDir: first.dataDir, runOperations: false });
    await crashed.request({ method: "DELETE", url: `/v4/${crashed.projectId}/clusters/${uuid}` });
    await crashed.db
      .update(operations)
      .set({ state: "running", attempts: 1, cursor: { step: 1, progress: {} } })
      .where(eq(operations.kind, "cluster.delete"));
    await crashed.close(true);

    const second = await createTestApp({ dataDir: first.dataDir });
    try {
      await second.app.keelson.runner.idle();
      expect(
        (await second.request({ method: "GET", url: `/v4/${second.projectId}/clusters/${uuid}` })).statusCode,
      ).toBe(404);
      const op = firstRow(await second.db.select().from(operations).where(eq(operations.kind, "cluster.delete")));
      expect(op?.state).toBe("succeeded");
      expect(op?.attempts).toBe(2);
    } finally {
      await second.close();
    }
  });
});

describe("cluster nodes", () => {
  it("lists no nodes for a new cluster, 404 for an unknown one, 403 across projects", async () => {
    const t = await createTestApp();
    try {
      const { uuid } = (
        await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name: "n" } })
      ).json();
      const res = await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters/${uuid}/nodes` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([]);
      const unknown = `/v4/${t.projectId}/clusters/00000000-0000-4000-8000-000000000000/nodes`;
      expect((await t.request({ method: "GET", url: unknown })).statusCode).toBe(404);
      const other = await t.request({
        method: "GET",
        url: `/v4/${t.projectId}/clusters/${uuid}/nodes`,
        token: t.otherToken,
      });
      expect(other.statusCode).toBe(403);
    } finally {
      await t.close();
    }
  });
});
