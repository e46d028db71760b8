import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cloudProviders, clusters, type Db, firstRow, nodePools } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { InjectOptions } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { type AzureStandin, azureKeys, startAzureStandin } from "../../../test/azure-standin/server.ts";
import { type GcpStandin, gcpKeys, startGcpStandin } from "../../../test/gcp-standin/server.ts";
import { parseSshPublicKey } from "../src/domain/cloud-providers/ssh-public-key.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { storedSpec } from "./node-fixtures.ts";
import { SSH_KEYS } from "./ssh-key-fixtures.ts";

/** The AWS stand-in's account: every aws account here is checked with it. */
const AWS = STANDIN_KEYS;
/** The Azure stand-in's account: every azure account here is checked with it. */
const AZURE = azureKeys();
/** A key file of the GCP stand-in's account, for the shape checks (nothing is asked of a cloud for those). */
const GCP = gcpKeys("http://127.0.0.1:9/token");
const GCP_SECRET = GCP.secret;

const V4_KEYS = ["name", "nodePoolUuid", "type", "uuid"];
const V3_KEYS = ["name", "nodePoolName", "nodePoolUuid", "projectID", "type", "uuid"];

async function localProvider(db: Db, projectId: string) {
  const provider = firstRow(
    await db
      .select()
      .from(cloudProviders)
      .where(and(eq(cloudProviders.projectId, projectId), eq(cloudProviders.type, "local"))),
  );
  if (!provider) throw new Error("no local provider");
  return provider;
}

async function poolOf(db: Db, providerId: string) {
  return firstRow(await db.select().from(nodePools).where(eq(nodePools.cloudProviderId, providerId)));
}

async function insertCluster(db: Db, projectId: string, providerId: string, name: string): Promise<string> {
  const pool = await poolOf(db, providerId);
  if (!pool) throw new Error("no pool");
  const id = randomUUID();
  await db.insert(clusters).values({
    id,
    projectId,
    name,
    nodePoolId: pool.id,
    cloudProviderId: providerId,
    kubeRoleVersion: "1.31.4-kls.1",
    spec: storedSpec({ name, kubeRoleVersion: "1.31.4-kls.1" }),
    caCertPem: "dummy",
    caKeyEnc: "dummy",
  });
  return id;
}

async function providerCount(db: Db): Promise<number> {
  return (await db.select().from(cloudProviders)).length;
}

describe("cloud providers", () => {
  let t: TestApp;
  const p = () => t.projectId;

  async function create(version: "v3" | "v4", body: Record<string, unknown>, token?: string) {
    return t.request({ method: "POST", url: `/${version}/${p()}/cloudProviders`, payload: body, token });
  }

  async function createOk(version: "v3" | "v4", body: Record<string, unknown>): Promise<string> {
    const res = await create(version, body);
    expect(res.statusCode, res.body).toBe(200);
    return res.json().uuid as string;
  }

  let standin: AwsStandin;
  let azureStandin: AzureStandin;
  let gcpStandin: GcpStandin;
  /** The GCP stand-in's account, its tokens from the stand-in: every gcp account created here. */
  const gcp = () => gcpKeys(gcpStandin.tokenUri);
  beforeAll(async () => {
    standin = await startAwsStandin();
    azureStandin = await startAzureStandin();
    gcpStandin = await startGcpStandin();
    t = await createTestApp({
      settings: {
        awsEndpointUrl: standin.url,
        azureAuthorityHost: azureStandin.url,
        azureResourceManagerUrl: azureStandin.url,
        cloudCaFile: azureStandin.caFile,
        gcpComputeEndpoint: `${gcpStandin.url}/compute/v1/`,
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await standin.close();
    await azureStandin.close();
    await gcpStandin.close();
  });

  describe("list", () => {
    it("shows the built-in local provider with the v4 key set", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders` });
      expect(res.statusCode).toBe(200);
      const list = res.json() as Record<string, string>[];
      const local = list.find((x) => x.type === "local");
      expect(local).toMatchObject({ type: "local", name: "local" });
      expect(Object.keys(local ?? {}).sort()).toEqual(V4_KEYS);
      expect(local?.name).toBe("local");
      expect(local?.nodePoolUuid).toBe((await poolOf(t.db, local?.uuid ?? ""))?.id);
    });

    it("v3 adds nodePoolName and projectID, all strings", async () => {
      const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders` });
      expect(res.statusCode).toBe(200);
      const local = (res.json() as Record<string, unknown>[]).find((x) => x.type === "local");
      expect(Object.keys(local ?? {}).sort()).toEqual(V3_KEYS);
      expect(local?.nodePoolName).toBe("defaultPool");
      expect(local?.projectID).toBe(p());
      for (const value of Object.values(local ?? {})) expect(typeof value).toBe("string");
    });

    it("is the same under /qbert", async () => {
      const plain = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders` });
      const prefixed = await t.request({ method: "GET", url: `/qbert/v4/${p()}/cloudProviders` });
      expect(prefixed.statusCode).toBe(200);
      expect(prefixed.json()).toEqual(plain.json());
    });

    it("answers 404 to the admin for a project that does not exist", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${randomUUID()}/cloudProviders`, token: ADMIN_TOKEN });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("types", () => {
    it("v4 supports local and aws", async () => {
      const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProvider/types` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual([{ type: "local" }, { type: "aws" }]);
    });

    it("v3 supports local, aws, azure and gcp", async () => {
      const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProvider/types` });
      expect(res.json()).toEqual([{ type: "local" }, { type: "aws" }, { type: "azure" }, { type: "gcp" }]);
    });
  });

  describe("create", () => {
    it("v4 creates an aws account and its node pool", async () => {
      const uuid = await createOk("v4", { name: "aws-main", type: "aws", ...AWS });
      const list = (await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders` })).json() as Record<
        string,
        string
      >[];
      const created = list.find((x) => x.uuid === uuid);
      expect(created).toEqual({ name: "aws-main", uuid, type: "aws", nodePoolUuid: (await poolOf(t.db, uuid))?.id });
      expect((await poolOf(t.db, uuid))?.name).toBe("aws-main-pool");
      const pools = (await t.request({ method: "GET", url: `/v4/${p()}/nodePools` })).json() as Record<
        string,
        string
      >[];
      expect(pools).toContainEqual({
        name: "aws-main-pool",
        uuid: created?.nodePoolUuid,
        cloudProviderUuid: uuid,
        cloudProviderName: "aws-main",
      });
    });

    it("v3 creates aws, azure and gcp accounts", async () => {
      const ids = [
        await createOk("v3", { name: "v3-aws", type: "aws", ...AWS }),
        await createOk("v3", { name: "v3-azure", type: "azure", ...AZURE }),
        await createOk("v3", { name: "v3-gcp", type: "gcp", ...gcp() }),
      ];
      const list = (await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders` })).json() as Record<
        string,
        string
      >[];
      for (const [i, type] of ["aws", "azure", "gcp"].entries()) {
        const row = list.find((x) => x.uuid === ids[i]);
        expect(row?.type).toBe(type);
        expect(row?.nodePoolName).toBe(`v3-${type}-pool`);
        expect(Object.keys(row ?? {}).sort()).toEqual(V3_KEYS);
      }
    });

    it("v4 refuses azure and gcp, naming type and what v4 supports", async () => {
      const before = await providerCount(t.db);
      for (const body of [
        { name: "az", type: "azure", ...AZURE },
        { name: "gc", type: "gcp", ...GCP },
      ]) {
        const res = await create("v4", body);
        expect(res.statusCode).toBe(400);
        expect(res.json().field).toBe("type");
        expect(res.json().message).toContain("aws");
      }
      expect(await providerCount(t.db)).toBe(before);
    });

    it("refuses another local provider with 409", async () => {
      for (const version of ["v4", "v3"] as const) {
        const res = await create(version, { name: "local2", type: "local", key: "x", secret: "y" });
        expect(res.statusCode).toBe(409);
        expect(res.json().code).toBe("builtin_provider");
      }
    });

    it("refuses a duplicate name in the project with 409 and stores nothing", async () => {
      await createOk("v4", { name: "dup", type: "aws", ...AWS });
      const before = await providerCount(t.db);
      const res = await create("v3", { name: "dup", type: "azure", ...AZURE });
      expect(res.statusCode).toBe(409);
      expect(res.json().code).toBe("duplicate_name");
      expect(await providerCount(t.db)).toBe(before);
    });

    it("allows the same name in another project", async () => {
      const res = await t.request({
        method: "POST",
        url: `/v4/${t.otherProjectId}/cloudProviders`,
        payload: { name: "dup", type: "aws", ...AWS },
        token: t.otherToken,
      });
      expect(res.statusCode).toBe(200);
    });

    const bad: [string, Record<string, unknown>, string, "v3" | "v4"][] = [
      ["missing name", { type: "aws", ...AWS }, "name", "v4"],
      ["missing key", { name: "n", type: "aws", secret: AWS.secret }, "key", "v4"],
      ["missing secret", { name: "n", type: "aws", key: AWS.key }, "secret", "v4"],
      ["missing type", { name: "n", ...AWS }, "type", "v4"],
      ["blank name", { name: "  ", type: "aws", ...AWS }, "name", "v4"],
      ["control character in name", { name: "a\nb", type: "aws", ...AWS }, "name", "v4"],
      ["unknown type", { name: "n", type: "openstack", ...AWS }, "type", "v3"],
      ["aws key of the wrong shape", { name: "n", type: "aws", key: "AKIA123", secret: AWS.secret }, "key", "v4"],
      ["aws secret pasted as key", { name: "n", type: "aws", key: AWS.secret, secret: AWS.secret }, "key", "v4"],
      ["lower-case aws key", { name: "n", type: "aws", key: AWS.key.toLowerCase(), secret: AWS.secret }, "key", "v4"],
      ["short aws secret", { name: "n", type: "aws", key: AWS.key, secret: AWS.secret.slice(1) }, "secret", "v4"],
      ["azure key not a GUID", { name: "n", type: "azure", key: "client", secret: "s" }, "key", "v3"],
      ["empty azure secret", { name: "n", type: "azure", key: AZURE.key, secret: "" }, "secret", "v3"],
      ["gcp key not a project id", { name: "n", type: "gcp", key: "Bad_Project", secret: GCP_SECRET }, "key", "v3"],
      ["gcp secret not JSON", { name: "n", type: "gcp", key: GCP.key, secret: "{nope" }, "secret", "v3"],
      [
        "gcp secret not a service account",
        { name: "n", type: "gcp", key: GCP.key, secret: JSON.stringify({ type: "authorized_user" }) },
        "secret",
        "v3",
      ],
      [
        "gcp secret without private_key",
        {
          name: "n",
          type: "gcp",
          key: GCP.key,
          secret: JSON.stringify({ type: "service_account", client_email: "a@b.c" }),
        },
        "secret",
        "v3",
      ],
      [
        "gcp key file of another project",
        { name: "n", type: "gcp", key: "other-project", secret: GCP_SECRET },
        "secret",
        "v3",
      ],
    ];
    for (const [label, body, field, version] of bad) {
      it(`400 for ${label}, naming ${field}, nothing stored`, async () => {
        const before = await providerCount(t.db);
        const res = await create(version, body);
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().field).toBe(field);
        expect(await providerCount(t.db)).toBe(before);
        // Error messages never echo credential values.
        for (const value of [AWS.key, AWS.secret, AZURE.secret, 'private_key":"-----']) {
          expect(res.body).not.toContain(value);
        }
      });
    }
  });

  describe("credentials are write-only and encrypted at rest", () => {
    const SECRET_AWS = { key: "AKIAZZZZZZZZZZPLAIN1", secret: "PlainTextSecretThatMustNeverLeak/0123456" };
    let uuid: string;

    beforeAll(async () => {
      standin.keys.set(SECRET_AWS.key, SECRET_AWS.secret);
      uuid = await createOk("v4", { name: "secret-check", type: "aws", ...SECRET_AWS });
    });

    it("no endpoint returns key or secret", async () => {
      const pool = (await poolOf(t.db, uuid))?.id as string;
      const reads: InjectOptions[] = [
        { method: "GET", url: `/v4/${p()}/cloudProviders` },
        { method: "GET", url: `/v3/${p()}/cloudProviders` },
        { method: "GET", url: `/v4/${p()}/cloudProviders/${uuid}` },
        { method: "GET", url: `/v3/${p()}/cloudProviders/${uuid}` },
        { method: "GET", url: `/v4/${p()}/nodePools` },
        { method: "GET", url: `/v3/${p()}/nodePools` },
        { method: "POST", url: `/v4/${p()}/cloudProviders`, payload: { name: "x2", type: "aws", ...SECRET_AWS } },
        {
          method: "POST",
          url: `/v4/${p()}/cloudProviders/validate`,
          payload: { name: "x", type: "aws", ...SECRET_AWS },
        },
        { method: "PUT", url: `/v4/cloudProviders/${uuid}`, payload: { ...SECRET_AWS } },
        { method: "PUT", url: `/v1/cloudProviders/${uuid}`, payload: { ...SECRET_AWS } },
      ];
      for (const read of reads) {
        const res = await t.request(read);
        expect(res.statusCode, `${read.method} ${read.url}: ${res.body}`).toBe(200);
        expect(res.body).not.toContain(SECRET_AWS.key);
        expect(res.body).not.toContain(SECRET_AWS.secret);
        expect(res.body).not.toMatch(/"(key|secret|keyEnc|secretEnc)"/);
      }
      expect(pool).toMatch(/^[0-9a-f-]{36}$/);
    });

    it("the database holds ciphertext that decrypts to the credentials", async () => {
      const row = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)));
      expect(row?.keyEnc).toMatch(/^v1\./);
      expect(row?.secretEnc).toMatch(/^v1\./);
      expect(row?.keyEnc).not.toContain(SECRET_AWS.key);
      expect(t.app.keelson.cipher.decrypt(row?.keyEnc as string)).toBe(SECRET_AWS.key);
      expect(t.app.keelson.cipher.decrypt(row?.secretEnc as string)).toBe(SECRET_AWS.secret);
    });

    it("no file of the data dir, and no stored row, contains the plaintext", async () => {
      const rows = JSON.stringify(await t.db.select().from(cloudProviders));
      expect(rows).toContain(uuid);
      expect(rows).not.toContain(SECRET_AWS.key);
      expect(rows).not.toContain(SECRET_AWS.secret);
      // The WAL is one of the files read: what is not yet in the database file is there. (On
      // PostgreSQL the data dir holds the keys and packages, the rows are the server's.)
      const files = readdirSync(t.dataDir);
      expect(files.some((f) => f.endsWith(".sqlite"))).toBe(t.store.dialect === "sqlite");
      for (const file of files) {
        const bytes = readFileSync(join(t.dataDir, file));
        expect(bytes.includes(SECRET_AWS.key), file).toBe(false);
        expect(bytes.includes(SECRET_AWS.secret), file).toBe(false);
      }
    });
  });

  describe("detail (regions)", () => {
    let aws: string;
    beforeAll(async () => {
      aws = await createOk("v4", { name: "regions", type: "aws", ...AWS });
    });

    it("lists the account's regions from EC2 DescribeRegions, v4 and v3", async () => {
      for (const version of ["v4", "v3"]) {
        const calls = standin.calls.length;
        const res = await t.request({ method: "GET", url: `/${version}/${p()}/cloudProviders/${aws}` });
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        expect(Object.keys(body)).toEqual(["Regions"]);
        // The stand-in's account has three regions enabled, and only those are listed.
        expect(body.Regions).toEqual([
          { RegionName: "eu-central-1", Endpoint: "ec2.eu-central-1.amazonaws.com" },
          { RegionName: "us-east-1", Endpoint: "ec2.us-east-1.amazonaws.com" },
          { RegionName: "us-west-2", Endpoint: "ec2.us-west-2.amazonaws.com" },
        ]);
        expect(standin.calls.slice(calls)).toEqual([
          {
            service: "ec2",
            action: "DescribeRegions",
            region: "us-east-1",
            accessKeyId: AWS.key,
            params: { Action: "DescribeRegions", Version: "2016-11-15" },
            status: 200,
          },
        ]);
      }
    });

    it("serves the azure and gcp lists from v3", async () => {
      const list = (await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders` })).json() as Record<
        string,
        string
      >[];
      const azure = list.find((x) => x.type === "azure")?.uuid;
      const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${azure}` });
      expect(res.json().Regions.map((r: { RegionName: string }) => r.RegionName)).toContain("westeurope");
    });

    it("answers 400 for the local provider, which has no regions", async () => {
      const local = (await localProvider(t.db, p())).id;
      const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${local}` });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: "no_regions", message: expect.stringContaining("local provider") });
    });

    it("answers 404 for an unknown provider and for another project's provider", async () => {
      const unknown = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${randomUUID()}` });
      expect(unknown.statusCode).toBe(404);
      const other = (await localProvider(t.db, t.otherProjectId)).id;
      const res = await t.request({ method: "GET", url: `/v4/${p()}/cloudProviders/${other}` });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("delete", () => {
    it("deletes an unused account and its node pool, v4 and v3", async () => {
      for (const version of ["v4", "v3"]) {
        const uuid = await createOk("v3", { name: `gone-${version}`, type: "aws", ...AWS });
        const pool = (await poolOf(t.db, uuid))?.id as string;
        const res = await t.request({ method: "DELETE", url: `/${version}/${p()}/cloudProviders/${uuid}` });
        expect(res.statusCode).toBe(200);
        expect(res.body).toBe("");
        expect(firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)))).toBeUndefined();
        expect(firstRow(await t.db.select().from(nodePools).where(eq(nodePools.id, pool)))).toBeUndefined();
        const again = await t.request({ method: "DELETE", url: `/${version}/${p()}/cloudProviders/${uuid}` });
        expect(again.statusCode).toBe(404);
      }
    });

    it("refuses to delete the built-in local provider", async () => {
      const local = (await localProvider(t.db, p())).id;
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/cloudProviders/${local}` });
      expect(res.statusCode).toBe(409);
      expect(res.json().code).toBe("builtin_provider");
      expect((await localProvider(t.db, p())).id).toBe(local);
    });

    it("answers 409 while a cluster uses the account", async () => {
      const uuid = await createOk("v4", { name: "in-use", type: "aws", ...AWS });
      const clusterId = await insertCluster(t.db, p(), uuid, "uses-aws");
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/cloudProviders/${uuid}` });
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: "provider_in_use", message: expect.stringContaining("uses-aws") });
      expect(await poolOf(t.db, uuid)).toMatchObject({ cloudProviderId: uuid });
      await t.db.delete(clusters).where(eq(clusters.id, clusterId));
      const after = await t.request({ method: "DELETE", url: `/v4/${p()}/cloudProviders/${uuid}` });
      expect(after.statusCode).toBe(200);
    });

    it("answers 404 for another project's provider", async () => {
      const other = (await localProvider(t.db, t.otherProjectId)).id;
      const res = await t.request({ method: "DELETE", url: `/v4/${p()}/cloudProviders/${other}` });
      expect(res.statusCode).toBe(404);
    });
  });

  describe("validate", () => {
    it("answers 200 with no body for a well-formed body and stores nothing", async () => {
      const before = await providerCount(t.db);
      for (const [version, body] of [
        ["v4", { name: "check", type: "aws", ...AWS }],
        ["v3", { name: "check", type: "azure", ...AZURE }],
        ["v3", { name: "check", type: "gcp", ...gcp() }],
      ] as const) {
        const res = await t.request({
          method: "POST",
          url: `/${version}/${p()}/cloudProviders/validate`,
          payload: body,
        });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.body).toBe("");
      }
      expect(await providerCount(t.db)).toBe(before);
    });

    it("answers 400 naming the field of a malformed body", async () => {
      const cases: [string, Record<string, unknown>, string][] = [
        ["v4", { name: "c", type: "aws", key: "nope", secret: AWS.secret }, "key"],
        ["v4", { name: "c", type: "azure", ...AZURE }, "type"],
        ["v3", { name: "c", type: "gcp", key: GCP.key, secret: "[]" }, "secret"],
        ["v3", { name: "c", type: "local", key: "k", secret: "s" }, "type"],
        ["v3", { type: "aws", ...AWS }, "name"],
      ];
      for (const [version, body, field] of cases) {
        const res = await t.request({
          method: "POST",
          url: `/${version}/${p()}/cloudProviders/validate`,
          payload: body,
        });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().field).toBe(field);
      }
    });
  });

  describe("update (PUT /v4 and /v1, no project in the path)", () => {
    let uuid: string;
    beforeAll(async () => {
      uuid = await createOk("v4", { name: "to-rename", type: "aws", ...AWS });
    });

    it("renames the account and its node pool", async () => {
      const res = await t.request({ method: "PUT", url: `/v4/cloudProviders/${uuid}`, payload: { name: "renamed" } });
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe("");
      const row = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)));
      expect(row?.name).toBe("renamed");
      expect((await poolOf(t.db, uuid))?.name).toBe("renamed-pool");
      const v1 = await t.request({ method: "PUT", url: `/v1/cloudProviders/${uuid}`, payload: { name: "renamed-v1" } });
      expect(v1.statusCode).toBe(200);
      expect(firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)))?.name).toBe(
        "renamed-v1",
      );
    });

    it("re-keys with fresh ciphertext, leaving the other credential alone", async () => {
      const before = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)));
      const key = "ASIAABCDEFGHIJKLMNOP";
      // The new key is the account's second access key, with the secret the account has.
      standin.keys.set(key, AWS.secret);
      const res = await t.request({ method: "PUT", url: `/v1/cloudProviders/${uuid}`, payload: { key } });
      expect(res.statusCode).toBe(200);
      const after = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)));
      expect(t.app.keelson.cipher.decrypt(after?.keyEnc as string)).toBe(key);
      expect(after?.secretEnc).toBe(before?.secretEnc);
    });

    it("checks new credentials against the account's type and changes nothing on 400", async () => {
      const before = firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)));
      for (const [payload, field] of [
        [{ key: "AKIAshort" }, "key"],
        [{ secret: "short" }, "secret"],
        [{ name: "" }, "name"],
        [{ name: "ok-name", secret: "short" }, "secret"],
        [{}, "body"],
      ] as const) {
        const res = await t.request({ method: "PUT", url: `/v4/cloudProviders/${uuid}`, payload });
        expect(res.statusCode, JSON.stringify(payload)).toBe(400);
        expect(res.json().field).toBe(field);
      }
      expect(firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, uuid)))).toEqual(before);
    });

    it("answers 409 for a name another account of the project has", async () => {
      await createOk("v4", { name: "taken", type: "aws", ...AWS });
      const res = await t.request({ method: "PUT", url: `/v4/cloudProviders/${uuid}`, payload: { name: "taken" } });
      expect(res.statusCode).toBe(409);
    });

    it("answers 409 for the built-in local provider", async () => {
      const local = (await localProvider(t.db, p())).id;
      const res = await t.request({ method: "PUT", url: `/v4/cloudProviders/${local}`, payload: { name: "mine" } });
      expect(res.statusCode).toBe(409);
      expect((await localProvider(t.db, p())).name).toBe("local");
    });

    it("answers 404 for an id that exists nowhere, to project tokens and the admin", async () => {
      for (const token of [undefined, ADMIN_TOKEN]) {
        for (const version of ["v4", "v1"]) {
          const res = await t.request({
            method: "PUT",
            url: `/${version}/cloudProviders/${randomUUID()}`,
            payload: { name: "x" },
            token,
          });
          expect(res.statusCode).toBe(404);
        }
      }
    });

    it("answers 403 to a project token for another project's provider; the admin may update it", async () => {
      const otherAccount = await t.request({
        method: "POST",
        url: `/v4/${t.otherProjectId}/cloudProviders`,
        payload: { name: "theirs", type: "aws", ...AWS },
        token: t.otherToken,
      });
      const theirs = otherAccount.json().uuid as string;
      for (const version of ["v4", "v1"]) {
        const res = await t.request({
          method: "PUT",
          url: `/${version}/cloudProviders/${theirs}`,
          payload: { name: "hijack" },
        });
        expect(res.statusCode).toBe(403);
      }
      expect(firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, theirs)))?.name).toBe(
        "theirs",
      );
      const admin = await t.request({
        method: "PUT",
        url: `/v4/cloudProviders/${theirs}`,
        payload: { name: "theirs-renamed" },
        token: ADMIN_TOKEN,
      });
      expect(admin.statusCode).toBe(200);
    });
  });

  describe("ssh keys", () => {
    it("parses the type and comment of a key", () => {
      expect(parseSshPublicKey(`  ${SSH_KEYS.p521}  `)).toEqual({
        type: "ecdsa-sha2-nistp521",
        comment: "test@keelson",
      });
      expect(parseSshPublicKey(SSH_KEYS.rsa.split(" ").slice(0, 2).join(" "))).toEqual({
        type: "ssh-rsa",
        comment: "",
      });
    });
  });

  describe("authentication", () => {
    it("answers 403 on every endpoint without a token, with a bad one, and with another project's token", async () => {
      const aws = await createOk("v4", { name: "auth-target", type: "aws", ...AWS });
      const body = { name: "z", type: "aws", ...AWS };
      const endpoints: InjectOptions[] = [];
      for (const v of ["v4", "v3"]) {
        endpoints.push(
          { method: "GET", url: `/${v}/${p()}/cloudProviders` },
          { method: "POST", url: `/${v}/${p()}/cloudProviders`, payload: body },
          { method: "GET", url: `/${v}/${p()}/cloudProvider/types` },
          { method: "GET", url: `/${v}/${p()}/cloudProviders/${aws}` },
          { method: "DELETE", url: `/${v}/${p()}/cloudProviders/${aws}` },
          { method: "POST", url: `/${v}/${p()}/cloudProviders/validate`, payload: body },
        );
      }
      endpoints.push(
        { method: "PUT", url: `/v4/cloudProviders/${aws}`, payload: { name: "h" } },
        { method: "PUT", url: `/v1/cloudProviders/${aws}`, payload: { name: "h" } },
      );
      const before = await providerCount(t.db);
      for (const endpoint of endpoints) {
        for (const token of [null, "not-a-token", t.otherToken]) {
          const res = await t.request({ ...endpoint, token });
          expect(res.statusCode, `${endpoint.method} ${endpoint.url} token=${token}`).toBe(403);
          expect(res.json().code).toBe("forbidden");
        }
      }
      expect(await providerCount(t.db)).toBe(before);
      expect(firstRow(await t.db.select().from(cloudProviders).where(eq(cloudProviders.id, aws)))?.name).toBe(
        "auth-target",
      );
    });
  });
});
