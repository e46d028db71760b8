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
