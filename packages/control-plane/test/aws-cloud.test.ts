import { cloudProviders, firstRow, nodePools } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { readServerSettings } from "../src/settings.ts";
import { addAzureAccount } from "./azure-app-fixtures.ts";
import { createTestApp, mintProjectToken, type TestApp } from "./helpers.ts";
import { SSH_KEYS } from "./ssh-key-fixtures.ts";

/**
 * AWS accounts against the wire-level AWS stand-in (test/aws-standin): the real AWS SDK signs and
 * sends every call, the stand-in checks the signature and answers in AWS's protocols.
 */
const WRONG_KEY = { key: "AKIAWRONGWRONGWRONG1", secret: STANDIN_KEYS.secret };
const WRONG_SECRET = { key: STANDIN_KEYS.key, secret: "x".repeat(40) };

describe("AWS accounts on the AWS SDK", () => {
  let t: TestApp;
  let standin: AwsStandin;
  let aws: string;
  const p = () => t.projectId;

  async function counts() {
    return {
      providers: (await t.db.select().from(cloudProviders)).length,
      pools: (await t.db.select().from(nodePools)).length,
    };
  }

  /** A stand-in's address after it stopped: nothing listens there. */
  async function closedEndpoint(): Promise<string> {
    const gone = await startAwsStandin();
    await gone.close();
    return gone.url;
  }

  beforeAll(async () => {
    standin = await startAwsStandin();
    t = await createTestApp({ settings: { awsEndpointUrl: standin.url } });
    const res = await t.request({
      method: "POST",
      url: `/v4/${p()}/cloudProviders`,
      payload: { name: "main", type: "aws", ...STANDIN_KEYS },
    });
    expect(res.statusCode, res.body).toBe(200);
    aws = res.json().uuid;
    // The first AWS account of the app loads the AWS SDK (aws/load.ts): seconds on a busy machine.
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await standin.close();
  });

  describe("credentials are checked with AWS", () => {
    it("validate asks STS GetCallerIdentity, signed with the body's key", async () => {
      const calls = standin.calls.length;
      const res = await t.request({
        method: "POST",
        url: `/v4/${p()}/cloudProviders/validate`,
        payload: { name: "check", type: "aws", ...STANDIN_KEYS },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(standin.calls.slice(calls)).toEqual([
        {
          service: "sts",
          action: "GetCallerIdentity",
          region: "us-east-1",
          accessKeyId: STANDIN_KEYS.key,
          params: { Action: "GetCallerIdentity", Version: "2011-06-15" },
          status: 200,
        },
      ]);
    });

    it("keeps the account's SDK client between requests: one connection for several calls", async () => {
      const validate = () =>
        t.request({
          method: "POST",
          url: `/v4/${p()}/cloudProviders/validate`,
          payload: { name: "again", type: "aws", ...STANDIN_KEYS },
        });
      await validate();
      const connections = standin.connections;
      for (let i = 0; i < 5; i++) expect((await validate()).statusCode).toBe(200);
      expect(standin.connections).toBe(connections);
    });

    for (const [label, keys, awsCode] of [
      ["a key AWS does not know", WRONG_KEY, "InvalidClientTokenId"],
      ["a wrong secret", WRONG_SECRET, "SignatureDoesNotMatch"],
    ] as const) {
      it(`validate and create answer 400 for ${label}, saying AWS refused it, and store nothing`, async () => {
        const before = await counts();
        for (const [version, route] of [
          ["v4", "cloudProviders/validate"],
          ["v3", "cloudProviders/validate"],
          ["v4", "cloudProviders"],
          ["v3", "cloudProviders"],
        ] as const) {
          const res = await t.request({
            method: "POST",
            url: `/${version}/${p()}/${route}`,
            payload: { name: "refused", type: "aws", ...keys },
          });
          expect(res.statusCode, res.body).toBe(400);
          const body = res.json();
          expect(body).toMatchObject({ code: "cloud_refused_credentials", field: "key" });
          expect(body.message).toContain("AWS refused the credentials");
          expect(body.message).toContain(awsCode);
          expect(res.body).not.toContain(keys.secret);
        }
        expect(await counts()).toEqual(before);
      });
    }

    it("a re-key AWS refuses answers 400 and leaves the stored credentials as they were", async () => {
      const before = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, aws)));
      for (const payload of [{ secret: WRONG_SECRET.secret }, { key: WRONG_KEY.key }, { name: "x", ...WRONG_KEY }]) {
        const res = await t.request({ method: "PUT", url: `/v4/cloudProviders/${aws}`, payload });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().code).toBe("cloud_refused_credentials");
      }
      const after = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, aws)));
      expect(after).toEqual(before);
    });

    it("answers 503 when AWS cannot be reached, and stores nothing", async () => {
      const before = await counts();
      t.settings.awsEndpointUrl = await closedEndpoint();
      try {
        for (const request of [
          { method: "POST", url: `/v4/${p()}/cloudProviders/validate` },
          { method: "POST", url: `/v3/${p()}/cloudProviders` },
        ] as const) {
          const res = await t.request({ ...request, payload: { name: "offline", type: "aws", ...STANDIN_KEYS } });
          expect(res.statusCode, res.body).toBe(503);
          expect(res.json().code).toBe("cloud_unreachable");
          expect(res.json().message).toMatch(/AWS could not be reached for the credential check.*ECONNREFUSED/);
        }
        const detail = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}` });
        expect(detail.statusCode).toBe(503);
        expect(detail.json().message).toContain("region list (EC2 DescribeRegions)");
      } finally {
        t.settings.awsEndpointUrl = standin.url;
      }
      expect(await counts()).toEqual(before);
    });

    it("a slow AWS does not hold a request past KEELSON_CLOUD_CALL_TIMEOUT_MS: 503, nothing stored", async () => {
      const before = await counts();
      t.settings.cloudCallTimeoutMs = 300;
      standin.latencyMs = 5_000;
      try {
        for (const request of [
          { method: "POST", url: `/v4/${p()}/cloudProviders/validate` },
          { method: "POST", url: `/v4/${p()}/cloudProviders` },
        ] as const) {
          const started = Date.now();
          const res = await t.request({ ...request, payload: { name: "slow", type: "aws", ...STANDIN_KEYS } });
          const took = Date.now() - started;
          expect(res.statusCode, res.body).toBe(503);
          expect(res.json()).toMatchObject({
            code: "cloud_unreachable",
            message: "AWS did not answer the credential check (STS GetCallerIdentity) within 300 ms",
          });
          expect(took).toBeGreaterThanOrEqual(290);
          expect(took).toBeLessThan(3_000);
        }
        const started = Date.now();
        const detail = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/us-east-1` });
        expect(detail.statusCode).toBe(503);
        expect(Date.now() - started).toBeLessThan(3_000);
      } finally {
        standin.latencyMs = 0;
        t.settings.cloudCallTimeoutMs = 15_000;
      }
      expect(await counts()).toEqual(before);
    });
  });

  describe("endpoint settings (the SDK's own variable names)", () => {
    it("AWS_ENDPOINT_URL_<SERVICE> wins over AWS_ENDPOINT_URL for its service only", async () => {
      const closed = await closedEndpoint();
      t.settings.awsEndpointUrl = closed;
      t.settings.awsEndpointUrlSts = standin.url;
      try {
        const validate = await t.request({
          method: "POST",
          url: `/v4/${p()}/cloudProviders/validate`,
          payload: { name: "split", type: "aws", ...STANDIN_KEYS },
        });
        expect(validate.statusCode, validate.body).toBe(200);
        const regions = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}` });
        expect(regions.statusCode).toBe(503);
        t.settings.awsEndpointUrlEc2 = standin.url;
        const again = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}` });
        expect(again.statusCode, again.body).toBe(200);
      } finally {
        t.settings.awsEndpointUrl = standin.url;
        t.settings.awsEndpointUrlSts = undefined;
        t.settings.awsEndpointUrlEc2 = undefined;
      }
    });

    it("are parsed once with the server's settings; a bad one stops the start naming it", () => {
      const parsed = readServerSettings({
        AWS_ENDPOINT_URL: "http://127.0.0.1:4566",
        AWS_ENDPOINT_URL_ROUTE_53: "https://r53.internal",
      });
      expect(parsed).toMatchObject({
        awsEndpointUrl: "http://127.0.0.1:4566",
        awsEndpointUrlRoute53: "https://r53.internal",
      });
      expect(() => readServerSettings({ AWS_ENDPOINT_URL_EC2: "ec2.internal" })).toThrow(/AWS_ENDPOINT_URL_EC2/);
      expect(() => readServerSettings({ KEELSON_CLOUD_CALL_TIMEOUT_MS: "10" })).toThrow(
        /KEELSON_CLOUD_CALL_TIMEOUT_MS/,
      );
    });
  });

  describe("region detail", () => {
    it("answers the six arrays from EC2 and Route 53, v4 and v3 alike", async () => {
      const calls = standin.calls.length;
      const v4 = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/us-west-2` });
      expect(v4.statusCode, v4.body).toBe(200);
      const made = standin.calls.slice(calls);
      const detail = v4.json();
      expect(Object.keys(detail).sort()).toEqual(["azs", "domains", "flavors", "keyPairs", "operatingSystems", "vpcs"]);
      expect(detail.azs.map((z: { name: string }) => z.name)).toEqual(["us-west-2a", "us-west-2b", "us-west-2c"]);
      expect(detail.domains).toEqual([
        { id: "Z0STANDIN00PUBLIC", name: "example.com", private: false },
        { id: "Z0STANDIN0PRIVATE", name: "internal.example", private: true },
      ]);
      // Both pages of DescribeInstanceTypes (the stand-in has 110 types, 100 a page).
      expect(detail.flavors).toHaveLength(110);
      expect(detail.flavors).toContainEqual({ name: "m6g.large", vcpus: 2, memoryMiB: 8192, architectures: ["arm64"] });
      // The newest build of each supported OS, and nothing else (no Windows image).
      expect(detail.operatingSystems.map((o: { os: string; imageName: string }) => [o.os, o.imageName])).toEqual([
        ["debian-12", "debian-12-amd64-20250520-2120"],
        ["ubuntu-22.04", "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20250401"],
        ["ubuntu-24.04", "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20250610"],
      ]);
      expect(detail.vpcs).toHaveLength(2);
      const own = detail.vpcs.find((v: { isDefault: boolean }) => !v.isDefault);
      expect(own).toMatchObject({ name: "platform", cidrBlock: "10.0.0.0/16" });
      expect(own.subnets.map((s: { az: string; public: boolean }) => [s.az, s.public])).toEqual([
        ["us-west-2a", true],
        ["us-west-2b", false],
      ]);
      expect(detail.vpcs.find((v: { isDefault: boolean }) => v.isDefault).subnets).toHaveLength(3);
      // One DescribeRegions to know the region, then the region's own calls, signed for it.
      expect(made[0]).toMatchObject({ service: "ec2", action: "DescribeRegions" });
      expect(made.map((c) => c.action).sort()).toEqual(
        [
          "DescribeAvailabilityZones",
          "DescribeImages",
          "DescribeInstanceTypes",
          "DescribeInstanceTypes",
          "DescribeKeyPairs",
          "DescribeRegions",
          "DescribeSubnets",
          "DescribeVpcs",
          "GET /2013-04-01/hostedzone",
        ].sort(),
      );
      for (const call of made.slice(1).filter((c) => c.service === "ec2")) expect(call.region).toBe("us-west-2");
      const v3 = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${aws}/region/us-west-2` });
      expect(v3.json()).toEqual(detail);
    });

    it("answers 404 for a region the account does not have", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/ap-south-9` });
      expect(res.statusCode).toBe(404);
      expect(res.json().message).toBe("aws region ap-south-9 does not exist");
    });

    it("answers 400 for the local provider and for azure, naming the supported type", async () => {
      const list = (await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders` })).json();
      const local = list.find((x: { type: string }) => x.type === "local").uuid;
      const { azure, azureStandin } = await addAzureAccount(t);
      await azureStandin.close();
      for (const [uuid, reason] of [
        [local, "the local provider has no cloud"],
        [azure, "not for azure accounts yet"],
      ]) {
        const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${uuid}/region/us-east-1` });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({
          code: "unsupported_provider",
          field: "uuid",
          message: `region detail is served for aws accounts only: ${reason}`,
        });
      }
    });

    it("answers 400 when AWS refuses the stored credentials", async () => {
      const extra = { key: "AKIASECONDKEY0000001", secret: STANDIN_KEYS.secret };
      standin.keys.set(extra.key, extra.secret);
      const res = await t.request({
        method: "POST",
        url: `/v4/${p()}/cloudProviders`,
        payload: { name: "revoked", type: "aws", ...extra },
      });
      const uuid = res.json().uuid;
      standin.keys.delete(extra.key); // the key was deactivated in IAM since
      const detail = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${uuid}/region/us-east-1` });
      expect(detail.statusCode).toBe(400);
      expect(detail.json()).toMatchObject({ code: "cloud_refused_credentials", field: "key" });
      expect(detail.json().message).toContain("AuthFailure");
    });
  });

  describe("sshKey", () => {
    const url = (version: string, region: string) => `/${version}/${p()}/cloudProviders/${aws}/region/${region}/sshKey`;

    it("imports the key as an EC2 key pair, which region detail then lists", async () => {
      const res = await t.request({
        method: "POST",
        url: url("v4", "eu-central-1"),
        payload: { name: "ops", key: SSH_KEYS.ed25519 },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body).toBe("");
      expect(standin.calls.at(-1)).toMatchObject({ action: "ImportKeyPair", region: "eu-central-1" });
      const detail = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/eu-central-1` });
      expect(detail.json().keyPairs).toEqual([{ name: "ops", fingerprint: expect.any(String), type: "ed25519" }]);
      const elsewhere = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/us-east-1` });
      expect(elsewhere.json().keyPairs).toEqual([]);
    });

    it("answers 409 for a name the region has, and 200 for the same name in another region (v3)", async () => {
      await t.request({ method: "POST", url: url("v3", "us-east-1"), payload: { name: "dup", key: SSH_KEYS.rsa } });
      const again = await t.request({
        method: "POST",
        url: url("v3", "us-east-1"),
        payload: { name: "dup", key: SSH_KEYS.p256 },
      });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({
        code: "duplicate_name",
        message: 'a key pair named "dup" already exists in us-east-1',
      });
      const other = await t.request({
        method: "POST",
        url: url("v3", "us-west-2"),
        payload: { name: "dup", key: SSH_KEYS.rsa },
      });
      expect(other.statusCode).toBe(200);
    });

    it("refuses a key that is not OpenSSH with 400 before asking AWS", async () => {
      const calls = standin.calls.length;
      for (const key of ["not a key", SSH_KEYS.ed25519.slice(0, 40), "-----BEGIN OPENSSH PRIVATE KEY-----"]) {
        const res = await t.request({ method: "POST", url: url("v4", "us-east-1"), payload: { name: "bad", key } });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ code: "invalid_ssh_key", field: "key" });
      }
      const badName = await t.request({
        method: "POST",
        url: url("v4", "us-east-1"),
        payload: { name: "tab\there", key: SSH_KEYS.ed25519 },
      });
      expect(badName.json()).toMatchObject({ code: "invalid_field", field: "name" });
      expect(standin.calls.length).toBe(calls);
    });

    it("needs the member role; a reader may read region detail", async () => {
      const reader = await mintProjectToken(t.db, p(), "reader");
      const post = await t.request({
        method: "POST",
        url: url("v4", "us-east-1"),
        payload: { name: "r", key: SSH_KEYS.ed25519 },
        token: reader,
      });
      expect(post.statusCode).toBe(403);
      const get = await t.request({
        method: "GET",
        url: `/v4/${p()}/cloudProviders/${aws}/region/us-east-1`,
        token: reader,
      });
      expect(get.statusCode).toBe(200);
      for (const token of [null, t.otherToken]) {
        const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${aws}/region/us-east-1`, token });
        expect(res.statusCode).toBe(403);
      }
    });
  });
});
