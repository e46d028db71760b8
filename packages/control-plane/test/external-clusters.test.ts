import { randomUUID } from "node:crypto";
import { cloudProviders, type Db, externalClusters, firstRow } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const AWS = STANDIN_KEYS;
const AZURE = { key: "0f8fad5b-d9cb-469f-a165-70867728950e", secret: "azure-secret" };

async function _localProviderId(db: Db, projectId: string): Promise<string> {
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
  let standin: AwsStandin;
  let aws: string;
  let _azure: string;
  let registeredId: string;
  const p = () => t.projectId;
  const base = () => `/v4/${p()}/externalClusters`;

  const _register = (payload: Record<string, unknown>, token?: string | null) =>
    t.request({ method: "POST", url: `${base()}/register`, payload, token });

  beforeAll(async () => {
    standin = await startAwsStandin();
    t = await createTestApp({ settings: { awsEndpointUrl: standin.url } });
    aws = (
      await t.request({
        method: "POST",
        url: `/v4/${p()}/cloudProviders`,
        payload: { name: "aws", type: "aws", ...AWS },
      })
    ).json().uuid;
    _azure = (
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
  afterAll(async () => {
    await t.close();
    await standin.close();
  });

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

  describe("register, deregister and deploymentYAML", () => {
    it("are not served: they need the clouds' APIs, which this server does not call", async () => {
      for (const [method, url] of [
        ["POST", `${base()}/register`],
        ["POST", `${base()}/${registeredId}/deregister`],
        ["GET", `${base()}/${registeredId}/deploymentYAML`],
      ] as const) {
        const res = await t.request({ method, url, payload: method === "POST" ? {} : undefined });
        expect(res.statusCode, url).toBe(404);
        expect(res.json().code).toBe("route_not_found");
      }
      expect(await count()).toBe(1);
    });
  });

  describe("authentication", () => {
    it("answers 403 on every endpoint without a token, with a bad one, and with another project's token", async () => {
      const endpoints: InjectOptions[] = [{ method: "GET", url: `${base()}/discover` }];
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
