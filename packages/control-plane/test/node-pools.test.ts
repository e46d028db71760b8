import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const POOL_KEYS = ["cloudProviderName", "cloudProviderUuid", "name", "uuid"];
const AWS = STANDIN_KEYS;

describe("node pools", () => {
  let t: TestApp;
  let standin: AwsStandin;
  beforeAll(async () => {
    standin = await startAwsStandin();
    t = await createTestApp({ settings: { awsEndpointUrl: standin.url } });
  });
  afterAll(async () => {
    await t.close();
    await standin.close();
  });

  it("every project starts with the local provider's defaultPool, same record in v4 and v3", async () => {
    const v4 = await t.request({ method: "GET", url: `/v4/${t.projectId}/nodePools` });
    const v3 = await t.request({ method: "GET", url: `/v3/${t.projectId}/nodePools` });
    expect(v4.statusCode).toBe(200);
    expect(v3.json()).toEqual(v4.json());
    const pools = v4.json() as Record<string, string>[];
    expect(pools).toHaveLength(1);
    expect(Object.keys(pools[0] ?? {}).sort()).toEqual(POOL_KEYS);
    expect(pools[0]).toMatchObject({ name: "defaultPool", cloudProviderName: "local" });
    const providers = (await t.request({ method: "GET", url: `/v4/${t.projectId}/cloudProviders` })).json();
    expect(providers[0]).toMatchObject({ uuid: pools[0]?.cloudProviderUuid, nodePoolUuid: pools[0]?.uuid });
  });

  it("lists one pool per account, following renames and deletes", async () => {
    const created = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/cloudProviders`,
      payload: { name: "east", type: "aws", ...AWS },
    });
    const uuid = created.json().uuid as string;
    const list = async () =>
      (await t.request({ method: "GET", url: `/v3/${t.projectId}/nodePools` })).json() as Record<string, string>[];
    expect((await list()).find((x) => x.cloudProviderUuid === uuid)).toMatchObject({
      name: "east-pool",
      cloudProviderName: "east",
    });
    await t.request({ method: "PUT", url: `/v4/cloudProviders/${uuid}`, payload: { name: "west" } });
    expect((await list()).find((x) => x.cloudProviderUuid === uuid)).toMatchObject({
      name: "west-pool",
      cloudProviderName: "west",
    });
    await t.request({ method: "DELETE", url: `/v4/${t.projectId}/cloudProviders/${uuid}` });
    expect((await list()).find((x) => x.cloudProviderUuid === uuid)).toBeUndefined();
  });

  it("shows only the project's own pools", async () => {
    const mine = (await t.request({ method: "GET", url: `/v4/${t.projectId}/nodePools` })).json();
    const theirs = (
      await t.request({ method: "GET", url: `/v4/${t.otherProjectId}/nodePools`, token: t.otherToken })
    ).json();
    const ids = new Set(mine.map((x: { uuid: string }) => x.uuid));
    for (const pool of theirs) expect(ids.has(pool.uuid)).toBe(false);
  });

  it("answers 404 to the admin for an unknown project", async () => {
    const res = await t.request({ method: "GET", url: `/v4/${randomUUID()}/nodePools`, token: ADMIN_TOKEN });
    expect(res.statusCode).toBe(404);
  });

  it("answers 403 without a token, with a bad one, and with another project's token", async () => {
    for (const version of ["v4", "v3"]) {
      for (const token of [null, "not-a-token", t.otherToken]) {
        const res = await t.request({ method: "GET", url: `/${version}/${t.projectId}/nodePools`, token });
        expect(res.statusCode).toBe(403);
        expect(res.json().code).toBe("forbidden");
      }
    }
  });
});
