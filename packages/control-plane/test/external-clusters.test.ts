import { randomUUID } from "node:crypto";
import { externalClusters } from "@keelson/db";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AwsStandin } from "../../../test/aws-standin/server.ts";
import type { AzureStandin } from "../../../test/azure-standin/server.ts";
import { appWithAwsAccount } from "./aws-app-fixtures.ts";
import { addAzureAccount } from "./azure-app-fixtures.ts";
import { ADMIN_TOKEN, type TestApp } from "./helpers.ts";

describe("external clusters", () => {
  let t: TestApp;
  let standin: AwsStandin;
  let aws: string;
  let azure: string;
  let azureStandin: AzureStandin;
  const p = () => t.projectId;
  const base = () => `/v4/${p()}/externalClusters`;

  const register = (payload: Record<string, unknown>, token?: string | null) =>
    t.request({ method: "POST", url: `${base()}/register`, payload, token });
  const discover = () => t.request({ method: "GET", url: `${base()}/discover` });
  const registered = async () =>
    (await t.request({ method: "GET", url: `/v1/projects/${p()}/externalClusters` })).json() as {
      id: string;
      providerDetails: { region: string };
    }[];
  const count = async () => (await t.db.select().from(externalClusters)).length;
  const eks = (id: string, region = "us-east-1") => ({
    id,
    provider: "eks",
    cloudProviderID: aws,
    providerDetails: { region },
  });

  beforeAll(async () => {
    ({ t, standin, aws } = await appWithAwsAccount());
    ({ azure, azureStandin } = await addAzureAccount(t));
    // The first AWS account of the app loads the AWS SDK (aws/load.ts): seconds on a busy machine.
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await standin.close();
    await azureStandin.close();
  });
  beforeEach(async () => {
    await t.db.delete(externalClusters);
    standin.eks.failing.clear();
    standin.eks.silent.clear();
  });

  describe("discover", () => {
    it("lists the EKS clusters of every region of the account, asking each region", async () => {
      const before = standin.calls.length;
      const res = await discover();
      expect(res.statusCode).toBe(200);
      expect(res.headers.warning).toBeUndefined();
      expect(res.json()).toEqual([
        { id: "analytics", provider: "eks", cloudProviderID: aws, providerDetails: { region: "eu-central-1" } },
        { id: "payments", provider: "eks", cloudProviderID: aws, providerDetails: { region: "us-east-1" } },
        { id: "prod-east", provider: "eks", cloudProviderID: aws, providerDetails: { region: "us-east-1" } },
      ]);
      const listed = standin.calls.slice(before).filter((c) => c.service === "eks");
      expect(listed.map((c) => c.region).sort()).toEqual(["eu-central-1", "us-east-1", "us-west-2"]);
      expect(new Set(listed.map((c) => c.action))).toEqual(new Set(["GET /clusters"]));
    });

    it("leaves out the clusters registered already, and lists a new one", async () => {
      expect((await register(eks("prod-east"))).statusCode).toBe(200);
      standin.eks.add("us-west-2", { name: "fresh" });
      try {
        const ids = (await discover()).json().map((c: { id: string }) => c.id);
        expect(ids).toEqual(["analytics", "payments", "fresh"]);
      } finally {
        standin.eks.clusters.get("us-west-2")?.delete("fresh");
      }
    });

    it("names a failing region in a Warning header and still lists the others", async () => {
      standin.eks.failing.add("eu-central-1");
      const res = await discover();
      expect(res.statusCode).toBe(200);
      expect(res.json().map((c: { id: string }) => c.id)).toEqual(["payments", "prod-east"]);
      expect(String(res.headers.warning)).toMatch(
        /^199 keelson ".*region eu-central-1: AWS failed .*ServiceUnavailable/,
      );
    });

    it("does not wait past the time limit for a region that never answers", async () => {
      standin.eks.silent.add("us-west-2");
      t.settings.cloudCallTimeoutMs = 400;
      try {
        const started = Date.now();
        const res = await discover();
        expect(res.statusCode).toBe(200);
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(res.json().map((c: { id: string }) => c.id)).toEqual(["analytics", "payments", "prod-east"]);
        expect(String(res.headers.warning)).toMatch(/region us-west-2: AWS did not answer .* within 400 ms/);
      } finally {
        t.settings.cloudCallTimeoutMs = 15_000;
      }
    });

    it("names an account whose credentials AWS no longer accepts", async () => {
      const key = "AKIAREVOKED000000001";
      const secret = "revokedSecretKey".padEnd(40, "0");
      standin.keys.set(key, secret);
      const created = await t.request({
        method: "POST",
        url: `/v4/${p()}/cloudProviders`,
        payload: { name: "revoked", type: "aws", key, secret },
      });
      expect(created.statusCode).toBe(200);
      standin.keys.delete(key);
      try {
        const res = await discover();
        expect(res.statusCode).toBe(200);
        expect(res.json()).toHaveLength(3);
        expect(String(res.headers.warning)).toMatch(/account revoked \(.*AWS refused the credentials/);
      } finally {
        await t.request({ method: "DELETE", url: `/v4/${p()}/cloudProviders/${created.json().uuid}` });
      }
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
    it("stores a cluster EKS knows and lists it; asks DescribeCluster in its region", async () => {
      const before = standin.calls.length;
      const res = await register(eks("payments"));
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe("");
      expect(await registered()).toMatchObject([{ id: "payments", providerDetails: { region: "us-east-1" } }]);
      expect(standin.calls.slice(before).filter((c) => c.service === "eks")).toEqual([
        expect.objectContaining({ action: "GET /clusters/payments", region: "us-east-1" }),
      ]);
    });

    it("answers 409 for a cluster registered already, also when two race", async () => {
      const both = await Promise.all([register(eks("prod-east")), register(eks("prod-east"))]);
      expect(both.map((r) => r.statusCode).sort()).toEqual([200, 409]);
      const again = await register(eks("prod-east"));
      expect(again.statusCode).toBe(409);
      expect(again.json().code).toBe("already_registered");
      expect(await count()).toBe(1);
    });

    it("answers 404 when EKS does not know the cluster in that region", async () => {
      // `analytics` exists, but in eu-central-1.
      const res = await register(eks("analytics", "us-east-1"));
      expect(res.statusCode).toBe(404);
      expect(res.json().message).toMatch(/eks cluster in us-east-1 analytics does not exist/);
      expect(await count()).toBe(0);
    });

    it("checks the region against the account's regions, not a static list", async () => {
      // ap-south-1 is an AWS region, but not one this account has (the stand-in's DescribeRegions).
      const res = await register(eks("payments", "ap-south-1"));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ field: "providerDetails.region" });
      expect(res.json().message).toMatch(/not a region of this AWS account/);
      expect(await count()).toBe(0);
    });

    it("answers 503 when EKS cannot answer, and stores nothing", async () => {
      standin.eks.failing.add("us-east-1");
      const res = await register(eks("payments"));
      expect(res.statusCode).toBe(503);
      expect(res.json().code).toBe("cloud_unavailable");
      expect(await count()).toBe(0);
    });

    it("answers 400 naming the field for malformed bodies and unsupported providers", async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ ...eks("payments"), providerDetails: {} }, "providerDetails.region"],
        [{ ...eks("payments"), id: " " }, "id"],
        [{ ...eks("payments"), provider: "openshift" }, "provider"],
        [{ ...eks("payments"), provider: "aks", cloudProviderID: azure }, "provider"],
        [{ ...eks("payments"), cloudProviderID: azure }, "cloudProviderID"],
        [{ id: "payments", provider: "eks", cloudProviderID: aws }, "providerDetails"],
      ];
      for (const [payload, field] of cases) {
        const res = await register(payload);
        expect(res.statusCode, JSON.stringify(payload)).toBe(400);
        expect(res.json().field, JSON.stringify(payload)).toBe(field);
      }
      expect(await count()).toBe(0);
    });

    it("answers 404 for an unknown account", async () => {
      const res = await register({ ...eks("payments"), cloudProviderID: randomUUID() });
      expect(res.statusCode).toBe(404);
      expect(await count()).toBe(0);
    });
  });

  describe("authentication", () => {
    it("answers 403 on every endpoint without a token, with a bad one, and with another project's token", async () => {
      const endpoints: InjectOptions[] = [
        { method: "GET", url: `${base()}/discover` },
        { method: "POST", url: `${base()}/register`, payload: eks("payments") },
        { method: "GET", url: `/v1/projects/${p()}/externalClusters` },
      ];
      for (const endpoint of endpoints) {
        for (const token of [null, "not-a-token", t.otherToken]) {
          const res = await t.request({ ...endpoint, token });
          expect(res.statusCode, `${endpoint.method} ${endpoint.url} token=${token}`).toBe(403);
          expect(res.json().code).toBe("forbidden");
        }
      }
      expect(await count()).toBe(0);
    });
  });
});
