import { cloudProviders, nodePools } from "@keelson/db";
import type { LightMyRequestResponse } from "fastify";
import { expect } from "vitest";
import type { TestApp } from "./helpers.ts";

/** The accounts and node pools stored: a refused account must change neither. */
export async function providerCounts(t: TestApp) {
  return {
    providers: (await t.db.select().from(cloudProviders)).length,
    pools: (await t.db.select().from(nodePools)).length,
  };
}

/** A cluster create on the node pool of `providerId` (an azure or gcp account) is the 400 that names the types with auto deploy. */
export async function expectAutoDeployRefused(t: TestApp, providerId: string, type: string): Promise<void> {
  const list = await t.request({ method: "GET", url: `/v4/${t.projectId}/cloudProviders` });
  const pool = list.json().find((x: { uuid: string }) => x.uuid === providerId).nodePoolUuid;
  const res = await t.request({
    method: "POST",
    url: `/v4/${t.projectId}/clusters`,
    payload: { name: `on-${type}`, nodePoolUuid: pool, region: "r1", numMasters: 1, numWorkers: 1 },
  });
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json()).toMatchObject({ code: "auto_deploy_unavailable", field: "nodePoolUuid" });
  expect(res.json().message).toContain(`belongs to a ${type} cloud provider: auto deploy runs on aws node pools`);
}

/**
 * A validate against a cloud stand-in slower than KEELSON_CLOUD_CALL_TIMEOUT_MS (300 ms here):
 * a 503 `cloud_unreachable` within 3 s that names `cloud`, and nothing stored.
 */
export async function expectSlowCloudRefused(
  t: TestApp,
  standin: { latencyMs: number },
  cloud: string,
  validate: () => Promise<LightMyRequestResponse>,
): Promise<void> {
  const before = await providerCounts(t);
  const limit = t.settings.cloudCallTimeoutMs;
  t.settings.cloudCallTimeoutMs = 300;
  standin.latencyMs = 5_000;
  try {
    const started = Date.now();
    const res = await validate();
    const took = Date.now() - started;
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json().code).toBe("cloud_unreachable");
    expect(res.json().message).toMatch(new RegExp(`^${cloud} did not answer .* within 300 ms$`));
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(3_000);
  } finally {
    standin.latencyMs = 0;
    t.settings.cloudCallTimeoutMs = limit;
  }
  expect(await providerCounts(t)).toEqual(before);
}

/**
 * The account's client (and with it the access token) is kept between calls (client-cache.ts):
 * a new account's first regions call asks for a token, the next ones do not; a re-key to
 * `rekeyed` (another valid secret of the same identity) asks again, once; the account deleted
 * and made again with the same credentials asks again too. `tokenRequests` counts the
 * stand-in's answered token requests.
 */
export async function expectClientKept(
  t: TestApp,
  account: { type: "azure" | "gcp"; key: string; secret: string; rekeyed: string },
  tokenRequests: () => number,
): Promise<void> {
  const create = async (name: string) => {
    const res = await t.request({
      method: "POST",
      url: `/v3/${t.projectId}/cloudProviders`,
      payload: { name, type: account.type, key: account.key, secret: account.secret },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().uuid as string;
  };
  /** The token requests one regions call made. */
  const regions = async (id: string) => {
    const before = tokenRequests();
    const res = await t.request({ method: "GET", url: `/v3/${t.projectId}/cloudProviders/${id}` });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().Regions.length).toBeGreaterThan(0);
    return tokenRequests() - before;
  };
  const id = await create("kept");
  expect([await regions(id), await regions(id), await regions(id)]).toEqual([1, 0, 0]);

  const rekey = await t.request({
    method: "PUT",
    url: `/v4/cloudProviders/${id}`,
    payload: { secret: account.rekeyed },
  });
  expect(rekey.statusCode, rekey.body).toBe(200);
  expect([await regions(id), await regions(id)]).toEqual([1, 0]);

  const gone = await t.request({ method: "DELETE", url: `/v3/${t.projectId}/cloudProviders/${id}` });
  expect(gone.statusCode, gone.body).toBe(200);
  const again = await create("kept-again");
  expect([await regions(again), await regions(again)]).toEqual([1, 0]);
}
