import { randomUUID } from "node:crypto";
import { cloudProviders, type Db, externalClusters, firstRow } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const AWS = { key: "AKIAIOSFODNN7EXAMPLE", secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" };
const AZURE = { key: "0f8fad5b-d9cb-469f-a165-70867728950e", secret: "azure-secret" };

async function localProviderId(db: Db, projectId: string): Promise<string> {
  const row = firstRow(
    await db
      .select()
      .from(cloudProviders)
      .where(and(eq(cloudProviders.projectId, projectId), eq(cloudProviders.type, "local"))),
  );
  return row?.id ?? "";
}

describe("external clusters", () => {
  let t: TestApp;
  let aws: string;
  let azure: string;
  let registeredId: string;
  const p = () => t.projectId;
  const base = () => `/v4/${p()}/externalClusters`;

  const register = (payload: Record<string, unknown>, token?: string | null) =>
    t.request({ method: "POST", url: `${base()}/register`, payload, token });

  beforeAll(async () => {
    t = await createTestApp();
    aws = (
      await t.request({
        method: "POST",
        url: `/v4/${p()}/cloudProviders`,
        payload: { name: "aws", type: "aws", ...AWS },
      })
    ).json().uuid;
    azure = (
      await t.request({
        method: "POST",
        url: `/v3/${p()}/cloudProviders`,
        payload: { name: "az", type: "azure", ...AZURE },
      })
    ).json().uuid;
    // What a registration will store once the cloud drivers exist.
    registeredId = randomUUID();
    await t.db.insert(externalClusters).values({
      id: registeredId,
      projectId: p(),
      externalId: "eks-prod",
      provider: "eks",
      cloudProviderId: aws,
      providerDetails: { region: "us-east-1" },
    });
  });
  afterAll(async () => t.close());

  const count = async () => (await t.db.select().from(externalClusters)).length;

  describe("discover", () => {
    it("answers 200 with an empty list until the cloud drivers exist", async () => {
      const res = await t.request({ method: "GET", url: `${base()}/discover` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([]);
    });

    it("answers 404 to the admin for an unknown project", async () => {
      const res = await t.request({
        method: "GET",
        url: `/v4/${randomUUID()}/externalClusters/discover`,
        token: ADMIN_TOKEN,
      });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("register", () => {
    const valid = () => ({
      id: "eks-new",
      provider: "eks",
      cloudProviderID: aws,
      providerDetails: { region: "eu-west-1" },
    });

    it("checks a valid body through to the cloud step, which answers 501 and stores nothing", async () => {
      const before = await count();
      for (const payload of [
        valid(),
        { ...valid(), provider: "EKS" },
        { id: "aks-1", provider: "aks", cloudProviderID: azure, providerDetails: { resourceGroup: "rg" } },
      ]) {
        const res = await register(payload);
        expect(res.statusCode, res.body).toBe(501);
        expect(res.json()).toMatchObject({
          code: "not_implemented",
          message: expect.stringContaining("cloud drivers"),
        });
      }
      expect(await count()).toBe(before);
    });

    const bad: [string, (v: Record<string, unknown>) => Record<string, unknown>, string][] = [
      ["missing id", ({ id: _id, ...rest }) => rest, "id"],
      ["blank id", (v) => ({ ...v, id: " " }), "id"],
      ["missing provider", ({ provider: _p, ...rest }) => rest, "provider"],
      ["unknown provider", (v) => ({ ...v, provider: "openshift" }), "provider"],
      ["missing cloudProviderID", ({ cloudProviderID: _c, ...rest }) => rest, "cloudProviderID"],
      ["missing providerDetails", ({ providerDetails: _d, ...rest }) => rest, "providerDetails"],
      ["providerDetails not an object", (v) => ({ ...v, providerDetails: "us-east-1" }), "providerDetails"],
      ["eks without a region", (v) => ({ ...v, providerDetails: {} }), "providerDetails.region"],
      [
        "eks with an unknown region",
        (v) => ({ ...v, providerDetails: { region: "mars-1" } }),
        "providerDetails.region",
      ],
      ["an account of the wrong cloud", (v) => ({ ...v, cloudProviderID: azure }), "cloudProviderID"],
    ];
    for (const [label, change, field] of bad) {
      it(`answers 400 for ${label}, naming ${field}`, async () => {
        const res = await register(change(valid()));
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().field).toBe(field);
      });
    }

    it("answers 400 for the local provider as the account", async () => {
      const res = await register({ ...valid(), cloudProviderID: await localProviderId(t.db, p()) });
      expect(res.statusCode).toBe(400);
      expect(res.json().field).toBe("cloudProviderID");
    });

    it("answers 404 for an unknown account and for another project's account", async () => {
      for (const id of [randomUUID(), await localProviderId(t.db, t.otherProjectId)]) {
        const res = await register({ ...valid(), cloudProviderID: id });
        expect(res.statusCode).toBe(404);
      }
    });

    it("answers 409 for a cluster registered already", async () => {
      const res = await register({ ...valid(), id: "eks-prod" });
      expect(res.statusCode).toBe(409);
      expect(res.json().code).toBe("already_registered");
    });
  });

  describe("deregister and deploymentYAML", () => {
    for (const [method, suffix] of [
      ["POST", "deregister"],
      ["GET", "deploymentYAML"],
    ] as const) {
      it(`${suffix}: 404 for a cluster that is not registered, in this project`, async () => {
        const res = await t.request({ method, url: `${base()}/${randomUUID()}/${suffix}` });
        expect(res.statusCode).toBe(404);
        const theirs = await t.request({
          method,
          url: `/v4/${t.otherProjectId}/externalClusters/${registeredId}/${suffix}`,
          token: ADMIN_TOKEN,
        });
        expect(theirs.statusCode).toBe(404);
      });

      it(`${suffix}: 501 for a registered cluster, by Keelson's id or the provider's`, async () => {
        for (const id of [registeredId, "eks-prod"]) {
          const res = await t.request({
            method,
            url: `${base()}/${id}/${suffix}`,
            // Existing clients send this header with an empty body on bodiless POSTs.
            headers: { "content-type": "application/json" },
          });
          expect(res.statusCode, res.body).toBe(501);
          expect(res.json().message).toContain("cloud drivers");
        }
        expect(await count()).toBe(1);
      });
    }
  });

  describe("authentication", () => {
    it("answers 403 on every endpoint without a token, with a bad one, and with another project's token", async () => {
      const endpoints: InjectOptions[] = [
        { method: "GET", url: `${base()}/discover` },
        {
          method: "POST",
          url: `${base()}/register`,
          payload: { id: "x", provider: "eks", cloudProviderID: aws, providerDetails: { region: "us-east-1" } },
        },
        { method: "POST", url: `${base()}/${registeredId}/deregister` },
        { method: "GET", url: `${base()}/${registeredId}/deploymentYAML` },
      ];
      for (const endpoint of endpoints) {
        for (const token of [null, "not-a-token", t.otherToken]) {
          const res = await t.request({ ...endpoint, token });
          expect(res.statusCode, `${endpoint.method} ${endpoint.url} token=${token}`).toBe(403);
          expect(res.json().code).toBe("forbidden");
        }
      }
    });
  });
});
