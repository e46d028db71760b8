import { cloudProviders, nodePools } from "@keelson/db";
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
