import { firstRow, nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listClusterNodeViews } from "../src/domain/nodes/nodes.ts";
import { presentNodeV3, presentNodeV4 } from "../src/domain/nodes/present.ts";
import { createTestApp, type TestApp } from "./helpers.ts";
import { insertCluster, insertHost, localPool, sampleFacts } from "./node-fixtures.ts";

const V4_FIELDS = [
  "agentConnected",
  "api_responding",
  "cloudProviderType",
  "clusterName",
  "clusterUuid",
  "isMaster",
  "lastSeen",
  "name",
  "nodePoolName",
  "nodePoolUuid",
  "primaryIp",
  "projectId",
  "status",
  "uuid",
];
const V3_FIELDS = [
  ...V4_FIELDS,
  "actualKubeRoleVersion",
  "cloudInstanceId",
  "cloudProviderUuid",
  "clusterKubeRoleVersion",
  "masterless",
  "startKube",
].sort();

describe("nodes v4 and v3", () => {
  let t: TestApp;
  let hostA: string;
  let hostB: string;
  let attached: string;
  let clusterId: string;
  let otherHost: string;

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    hostA = (
      await insertHost(t.db, t.projectId, {
        name: "host-a",
        primaryIp: "10.0.0.11",
        facts: sampleFacts("host-a", "10.0.0.11"),
        agentConnected: 1,
        lastSeen: "2030-01-01T00:00:00.000Z",
        createdAt: "2030-01-01T00:00:01.000Z",
      })
    ).id;
    hostB = (
      await insertHost(t.db, t.projectId, {
        name: "host-b",
        primaryIp: "10.0.0.12",
        agentConnected: 0,
        lastSeen: null,
        createdAt: "2030-01-01T00:00:02.000Z",
      })
    ).id;
    clusterId = await insertCluster(t.db, t.projectId, "c1", { masterless: true });
    attached = (
      await insertHost(t.db, t.projectId, {
        name: "host-c",
        clusterId,
        isMaster: 1,
        apiResponding: 1,
        actualKubeRoleVersion: "1.29.2-pmk.1",
        createdAt: "2030-01-01T00:00:03.000Z",
      })
    ).id;
    otherHost = (await insertHost(t.db, t.otherProjectId, { name: "elsewhere" })).id;
  });
  afterAll(() => t.close());

  it("lists the project's hosts as v4 records, unattached ones with a null cluster", async () => {
    const res = await t.request({ url: `/v4/${t.projectId}/nodes` });
    expect(res.statusCode).toBe(200);
    const list = res.json() as Record<string, unknown>[];
    expect(list.map((n) => n.name)).toEqual(["host-a", "host-b", "host-c"]);
    for (const node of list) expect(Object.keys(node).sort()).toEqual(V4_FIELDS);
    const { poolId } = await localPool(t.db, t.projectId);
    expect(list[0]).toEqual({
      uuid: hostA,
      name: "host-a",
      primaryIp: "10.0.0.11",
      status: "ok",
      isMaster: 0,
      api_responding: 0,
      clusterName: null,
      clusterUuid: null,
      cloudProviderType: "local",
      nodePoolName: "defaultPool",
      nodePoolUuid: poolId,
      projectId: t.projectId,
      agentConnected: true,
      lastSeen: "2030-01-01T00:00:00.000Z",
    });
    expect(list[1]).toMatchObject({ uuid: hostB, agentConnected: false, lastSeen: null });
    expect(list[2]).toMatchObject({
      uuid: attached,
      clusterUuid: clusterId,
      clusterName: "c1",
      isMaster: 1,
      api_responding: 1,
    });
  });

  it("lists v3 records with the v3 fields", async () => {
    const res = await t.request({ url: `/v3/${t.projectId}/nodes` });
    expect(res.statusCode).toBe(200);
    const list = res.json() as Record<string, unknown>[];
    for (const node of list) expect(Object.keys(node).sort()).toEqual(V3_FIELDS);
    const { providerId } = await localPool(t.db, t.projectId);
    expect(list[0]).toMatchObject({
      uuid: hostA,
      actualKubeRoleVersion: "",
      cloudInstanceId: "",
      cloudProviderUuid: providerId,
      clusterKubeRoleVersion: null,
      startKube: 0,
      masterless: 0,
    });
    expect(list[2]).toMatchObject({
      clusterKubeRoleVersion: "1.29.2-pmk.1",
      actualKubeRoleVersion: "1.29.2-pmk.1",
      startKube: 1,
      masterless: 1,
    });
  });

  it("reads one node in either version, also under /qbert", async () => {
    for (const version of ["v4", "v3"]) {
      const res = await t.request({ url: `/${version}/${t.projectId}/nodes/${hostA}` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ uuid: hostA, name: "host-a", agentConnected: true });
    }
    const compat = await t.request({ url: `/qbert/v4/${t.projectId}/nodes/${hostB}` });
    expect(compat.json()).toMatchObject({ uuid: hostB });
  });

  it("answers 404 for an unknown node or another project's node, 403 across projects", async () => {
    for (const id of ["00000000-0000-0000-0000-000000000000", otherHost]) {
      const res = await t.request({ url: `/v4/${t.projectId}/nodes/${id}` });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: "not_found" });
    }
    expect((await t.request({ url: `/v4/${t.otherProjectId}/nodes` })).statusCode).toBe(403);
    expect((await t.request({ url: `/v3/${t.projectId}/nodes`, token: null })).statusCode).toBe(403);
    expect((await t.request({ url: `/v3/${t.projectId}/nodes`, token: "bogus" })).statusCode).toBe(403);
    const admin = await t.request({ url: `/v4/${t.otherProjectId}/nodes`, token: "test-admin-token" });
    expect(admin.json()).toHaveLength(1);
  });

  it("PUT with clusterUuid null: 200 no body for an unattached node; an attached one gets a detach operation", async () => {
    for (const version of ["v4", "v3"]) {
      const ok = await t.request({
        method: "PUT",
        url: `/${version}/${t.projectId}/nodes/${hostA}`,
        payload: { clusterUuid: null },
      });
      expect(ok.statusCode).toBe(200);
      expect(ok.body).toBe("");
    }
    // The attached node's detach is an operation (issue 4; its rules: test/detach.test.ts). With
    // operations not running here it stays pending, so a second request finds it already leaving.
    const first = await t.request({
      method: "PUT",
      url: `/v4/${t.projectId}/nodes/${attached}`,
      payload: { clusterUuid: null },
    });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.body).toBe("");
    const again = await t.request({
      method: "PUT",
      url: `/v3/${t.projectId}/nodes/${attached}`,
      payload: { clusterUuid: null },
    });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: "already_detaching" });
    const row = firstRow(await t.db.select().from(nodes).where(eq(nodes.id, attached)));
    expect(row?.clusterId).toBe(clusterId);
  });

  it("PUT with any other body: 400 naming the field, nothing changed", async () => {
    const before = firstRow(await t.db.select().from(nodes).where(eq(nodes.id, hostA)));
    const cases: [unknown, string][] = [
      [{ clusterUuid: clusterId }, "clusterUuid"],
      [{}, "clusterUuid"],
      [{ clusterUuid: null, name: "renamed" }, "name"],
    ];
    for (const [payload, field] of cases) {
      const res = await t.request({
        method: "PUT",
        url: `/v4/${t.projectId}/nodes/${hostA}`,
        payload: payload as object,
      });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toMatchObject({ field });
    }
    const noBody = await t.request({ method: "PUT", url: `/v4/${t.projectId}/nodes/${hostA}` });
    expect(noBody.statusCode).toBe(400);
    expect(firstRow(await t.db.select().from(nodes).where(eq(nodes.id, hostA)))).toEqual(before);
    const unknown = await t.request({
      method: "PUT",
      url: `/v4/${t.projectId}/nodes/00000000-0000-0000-0000-000000000000`,
      payload: { clusterUuid: null },
    });
    expect(unknown.statusCode).toBe(404);
  });

  it("documents the node routes in the OpenAPI document", async () => {
    const doc = (await t.request({ url: "/openapi.json", token: null })).json() as { paths: Record<string, unknown> };
    for (const path of [
      "/v4/{project_uuid}/nodes",
      "/v4/{project_uuid}/nodes/{uuid}",
      "/v3/{project_uuid}/nodes/{uuid}",
    ]) {
      expect(doc.paths[path], path).toHaveProperty("get");
    }
  });

  it("exports presenters and a cluster's node query for other routes (cluster nodes)", async () => {
    expect((await listClusterNodeViews(t.db, t.projectId, clusterId)).map((v) => v.row.id)).toEqual([attached]);
    const row = firstRow(await t.db.select().from(nodes).where(eq(nodes.id, attached)));
    if (!row) throw new Error("missing row");
    const extras = {
      nodePool: { uuid: "p", name: "pool" },
      cloudProvider: { uuid: "cp", type: "local" },
      cluster: { uuid: clusterId, name: "c1", kubeRoleVersion: "1.29.2-pmk.1", masterless: false },
    };
    expect(presentNodeV4(row, extras)).toMatchObject({ clusterUuid: clusterId, nodePoolName: "pool" });
    expect(presentNodeV3(row, extras)).toMatchObject({ cloudProviderUuid: "cp", startKube: 1 });
  });
});
