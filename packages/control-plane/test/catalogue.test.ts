import { randomUUID } from "node:crypto";
import { addons, cloudProviders, clusters, type Db, firstRow, nodePools, operations } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareDotted } from "../src/domain/catalogue/addon-versions.ts";
import { loadCatalogue } from "../src/domain/catalogue/catalogue.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { storedSpec } from "./node-fixtures.ts";

const catalogue = loadCatalogue();

async function insertCluster(
  db: Db,
  projectId: string,
  name: string,
  kubeRoleVersion = "1.30.6-kls.1",
  status = "pending",
): Promise<string> {
  const provider = firstRow(
    await db
      .select()
      .from(cloudProviders)
      .where(and(eq(cloudProviders.projectId, projectId), eq(cloudProviders.type, "local"))),
  );
  const pool = firstRow(
    await db
      .select()
      .from(nodePools)
      .where(eq(nodePools.cloudProviderId, provider?.id ?? "")),
  );
  if (!provider || !pool) throw new Error("no local provider");
  const id = randomUUID();
  await db.insert(clusters).values({
    id,
    projectId,
    name,
    nodePoolId: pool.id,
    cloudProviderId: provider.id,
    kubeRoleVersion,
    status,
    spec: storedSpec({ name, kubeRoleVersion }),
    caCertPem: "dummy",
    caKeyEnc: "dummy",
  });
  return id;
}

async function insertAddons(db: Db, clusterId: string, roleVersion: string): Promise<void> {
  const role = catalogue.find(roleVersion);
  for (const [name, version] of Object.entries(role?.addons ?? {})) {
    await db.insert(addons).values({ id: randomUUID(), clusterId, name, version });
  }
}

const addonStates = async (db: Db, clusterId: string) =>
  new Set(
    (await db.select({ state: addons.state }).from(addons).where(eq(addons.clusterId, clusterId))).map((a) => a.state),
  );

describe("catalogue endpoints", () => {
  let t: TestApp;
  let cluster: string;
  const p = () => t.projectId;

  beforeAll(async () => {
    t = await createTestApp();
    cluster = await insertCluster(t.db, p(), "c-130");
  });
  afterAll(async () => t.close());

  describe("supportedRoleVersions", () => {
    it("lists every role version oldest first with the spec's key set", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/supportedRoleVersions` });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(["count", "roles"]);
      expect(body.count).toBe(catalogue.roles.length);
      expect(body.roles).toHaveLength(body.count);
      expect(body.roles.map((r: { roleVersion: string }) => r.roleVersion)).toEqual(
        catalogue.roles.map((r) => r.roleVersion),
      );
      expect(body.roles.at(-1).roleVersion).toBe(catalogue.newest.roleVersion);
      for (const role of body.roles) {
        expect(Object.keys(role).sort()).toEqual([
          "addonsDetails",
          "k8sMajorVersion",
          "k8sMinorVersion",
          "k8sPatchVersion",
          "metadata",
          "patchVersion",
          "roleVersion",
          "uuid",
        ]);
        expect(Object.keys(role.metadata).sort()).toEqual(["containerRuntime", "etcdVersion", "nodePackage"]);
        expect(Object.keys(role.addonsDetails)).toHaveLength(12);
      }
    });

    it("splits the role version into integers and a stable uuid", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/supportedRoleVersions` });
      const role = (res.json().roles as Record<string, unknown>[]).find((r) => r.roleVersion === "1.31.4-kls.1");
      expect(role).toMatchObject({
        uuid: catalogue.uuidOf("1.31.4-kls.1"),
        k8sMajorVersion: 1,
        k8sMinorVersion: 31,
        k8sPatchVersion: 4,
        patchVersion: 1,
        addonsDetails: catalogue.find("1.31.4-kls.1")?.addons,
        metadata: {
          containerRuntime: "containerd",
          etcdVersion: "3.5.16",
          nodePackage: { name: "keelson-node", version: "1.31.4-kls.1", file: "keelson-node-1.31.4-kls.1.tar.gz" },
        },
      });
      const again = await t.request({ method: "GET", url: `/qbert/v4/${p()}/clusters/supportedRoleVersions` });
      expect(again.json()).toEqual(res.json());
    });

    it("is not shadowed by the cluster routes' {uuid} segment", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/supportedRoleVersions` });
      expect(res.json()).toHaveProperty("roles");
    });

    it("answers 404 to the admin for an unknown project", async () => {
      const res = await t.request({
        method: "GET",
        url: `/v4/${randomUUID()}/clusters/supportedRoleVersions`,
        token: ADMIN_TOKEN,
      });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("addonversions", () => {
    it("answers the add-on versions of the cluster's role version", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/${cluster}/addonversions` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(catalogue.find("1.30.6-kls.1")?.addons);
      expect(res.json().calico).toBe("3.28.1");
    });

    it("works for a cluster created through the API, at the newest role version by default", async () => {
      const created = await t.request({ method: "POST", url: `/v4/${p()}/clusters`, payload: { name: "via-api" } });
      expect(created.statusCode, created.body).toBe(200);
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/${created.json().uuid}/addonversions` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(catalogue.newest.addons);
    });

    it("answers 404 for an unknown cluster and for a cluster of another project", async () => {
      const other = await insertCluster(t.db, t.otherProjectId, "theirs");
      for (const id of [randomUUID(), other]) {
        const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/${id}/addonversions` });
        expect(res.statusCode).toBe(404);
      }
    });

    it("answers 409 when the cluster's role version left the catalogue", async () => {
      const stale = await insertCluster(t.db, p(), "stale", "1.28.15-kls.1");
      const res = await t.request({ method: "GET", url: `/v4/${p()}/clusters/${stale}/addonversions` });
      expect(res.statusCode).toBe(409);
      expect(res.json().message).toContain("1.28.15-kls.1");
      const supported = await t.request({
        method: "DELETE",
        url: `/v4/${p()}/clusters/${stale}/suppotedaddonversions`,
      });
      expect(supported.statusCode).toBe(409);
    });
  });

  describe("suppotedaddonversions (DELETE, spelled as the spec spells it)", () => {
    it("lists per add-on the versions of the role versions the cluster runs or can upgrade to", async () => {
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${cluster}/suppotedaddonversions` });
      expect(res.statusCode).toBe(200);
      const body = res.json() as Record<string, string[]>;
      expect(Object.keys(body)).toHaveLength(12);
      // 1.30.6 reaches 1.30.8 (patch) and 1.31.x (next minor), not 1.29.x (older).
      expect(body.calico).toEqual(["3.28.1", "3.28.2"]);
      expect(body.monitoring).toEqual(["0.75.2", "0.77.1"]);
      expect(body.coredns).toEqual(["1.11.3"]);
      expect(body.flannel).toEqual(["0.25.6", "0.26.1"]);
      // And nothing from the cluster's past.
      expect(body.flannel).not.toContain("0.25.1");
      // The add-on rows did not change: this DELETE only reads.
      expect(firstRow(await t.db.select().from(clusters).where(eq(clusters.id, cluster)))?.kubeRoleVersion).toBe(
        "1.30.6-kls.1",
      );
    });

    it("for the newest role version, only its own versions", async () => {
      const newest = await insertCluster(t.db, p(), "newest", catalogue.newest.roleVersion);
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${newest}/suppotedaddonversions` });
      const expected = Object.fromEntries(Object.entries(catalogue.newest.addons).map(([k, v]) => [k, [v]]));
      expect(res.json()).toEqual(expected);
    });

    it("the correctly spelled path does not exist", async () => {
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${cluster}/supportedaddonversions` });
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe("route_not_found");
    });

    it("orders versions numerically", () => {
      expect(["0.10.0", "0.9.1", "0.9.0", "1.0.0"].sort(compareDotted)).toEqual(["0.9.0", "0.9.1", "0.10.0", "1.0.0"]);
    });
  });

  describe("supportedaddonoperatorversions (DELETE)", () => {
    it("lists the operator tags oldest first", async () => {
      const res = await t.request({
        method: "DELETE",
        url: `/v4/${p()}/clusters/${cluster}/supportedaddonoperatorversions`,
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual(["1.0.0", "1.1.0", "1.2.0"]);
    });

    it("answers 404 for an unknown cluster", async () => {
      const res = await t.request({
        method: "DELETE",
        url: `/v4/${p()}/clusters/${randomUUID()}/supportedaddonoperatorversions`,
      });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("DELETE addons", () => {
    it("marks the add-ons removing and records the operation in the same transaction", async () => {
      const paused = await createTestApp({ runOperations: false });
      try {
        const id = await insertCluster(paused.db, paused.projectId, "paused");
        await insertAddons(paused.db, id, "1.30.6-kls.1");
        const res = await paused.request({ method: "DELETE", url: `/v4/${paused.projectId}/clusters/${id}/addons` });
        expect(res.statusCode).toBe(200);
        expect(res.body).toBe("");
        expect(await addonStates(paused.db, id)).toEqual(new Set(["removing"]));
        const ops = await paused.db.select().from(operations).where(eq(operations.targetId, id));
        expect(ops).toHaveLength(1);
        expect(ops[0]).toMatchObject({ kind: "addons.remove", targetType: "cluster", state: "pending" });
        expect((ops[0]?.params as { addons?: string[] } | undefined)?.addons).toHaveLength(12);
      } finally {
        await paused.close();
      }
    });

    it("the runner finishes the removal", async () => {
      const id = await insertCluster(t.db, p(), "with-addons");
      await insertAddons(t.db, id, "1.30.6-kls.1");
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${id}/addons` });
      expect(res.statusCode).toBe(200);
      await t.app.keelson.runner.idle();
      expect(await addonStates(t.db, id)).toEqual(new Set(["removed"]));
      const op = firstRow(await t.db.select().from(operations).where(eq(operations.targetId, id)));
      expect(op?.state).toBe("succeeded");
      expect(op?.error).toBeNull();
    });

    it("takes the empty JSON body existing clients send with a DELETE", async () => {
      const id = await insertCluster(t.db, p(), "empty-json");
      const res = await t.request({
        method: "DELETE",
        url: `/v4/${p()}/clusters/${id}/addons`,
        headers: { "content-type": "application/json" },
      });
      expect(res.statusCode, res.body).toBe(200);
    });

    it("does not touch other clusters' add-ons", async () => {
      const a = await insertCluster(t.db, p(), "a-addons");
      const b = await insertCluster(t.db, p(), "b-addons");
      await insertAddons(t.db, a, "1.30.6-kls.1");
      await insertAddons(t.db, b, "1.30.6-kls.1");
      await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${a}/addons` });
      await t.app.keelson.runner.idle();
      expect(await addonStates(t.db, a)).toEqual(new Set(["removed"]));
      expect(await addonStates(t.db, b)).toEqual(new Set(["installed"]));
    });

    it("answers 409 while the cluster is being deleted and records nothing", async () => {
      const id = await insertCluster(t.db, p(), "deleting", "1.30.6-kls.1", "deleting");
      await insertAddons(t.db, id, "1.30.6-kls.1");
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${id}/addons` });
      expect(res.statusCode).toBe(409);
      expect(await addonStates(t.db, id)).toEqual(new Set(["installed"]));
      expect(await t.db.select().from(operations).where(eq(operations.targetId, id))).toHaveLength(0);
    });

    it("answers 404 for an unknown cluster and records nothing", async () => {
      const before = (await t.db.select().from(operations)).length;
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/clusters/${randomUUID()}/addons` });
      expect(res.statusCode).toBe(404);
      expect(await t.db.select().from(operations)).toHaveLength(before);
    });
  });

  describe("authentication", () => {
    it("answers 403 on every endpoint without a token, with a bad one, and with another project's token", async () => {
      const id = await insertCluster(t.db, p(), "auth-target");
      await insertAddons(t.db, id, "1.30.6-kls.1");
      const endpoints: InjectOptions[] = [
        { method: "GET", url: `/v4/${p()}/clusters/supportedRoleVersions` },
        { method: "GET", url: `/v4/${p()}/clusters/${id}/addonversions` },
        { method: "DELETE", url: `/v4/${p()}/clusters/${id}/suppotedaddonversions` },
        { method: "DELETE", url: `/v4/${p()}/clusters/${id}/supportedaddonoperatorversions` },
        { method: "DELETE", url: `/v4/${p()}/clusters/${id}/addons` },
      ];
      for (const endpoint of endpoints) {
        for (const token of [null, "not-a-token", t.otherToken]) {
          const res = await t.request({ ...endpoint, token });
          expect(res.statusCode, `${endpoint.method} ${endpoint.url} token=${token}`).toBe(403);
          expect(res.json().code).toBe("forbidden");
        }
      }
      expect(await addonStates(t.db, id)).toEqual(new Set(["installed"]));
    });
  });
});
