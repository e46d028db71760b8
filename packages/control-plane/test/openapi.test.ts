import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";

/** The spec's endpoints and Keelson's extensions appear in /openapi.json with their methods. */
describe("OpenAPI document", () => {
  let t: TestApp;
  const routes: { method: string; url: string }[] = [];
  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    const doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    for (const [path, methods] of Object.entries(doc.paths))
      for (const method of Object.keys(methods)) routes.push({ method: method.toUpperCase(), url: path });
  });
  afterAll(async () => t.close());

  it.each([
    ["POST", "/v4/{projectId}/clusters"],
    ["GET", "/v3/{project_uuid}/clusters/{uuid}"],
    ["POST", "/v4/{project_uuid}/clusters/{uuid}/attach"],
    ["POST", "/v3/{project_uuid}/clusters/{uuid}/restartMasters"],
    ["GET", "/v3/{project_uuid}/currentRollingRestarts"],
    ["DELETE", "/v4/{projectId}/clusters/{clusterId}/suppotedaddonversions"],
    ["PUT", "/v1/cloudProviders/{uuid}"],
    ["PUT", "/v4/cloudProviders/{uuid}"],
    ["GET", "/v4/{project_uuid}/kubeconfig/{cluster_uuid}"],
    ["POST", "/v4/{project_uuid}/webcli/{uuid}"],
    ["GET", "/v4/{project_uuid}/operations"],
    ["GET", "/v4/{project_uuid}/events"],
    ["POST", "/keystone/v3/auth/tokens"],
    ["POST", "/v1/projects/{projectId}/joinTokens"],
    ["POST", "/v1/agents/register"],
    ["GET", "/v1/hosts/{uuid}"],
    ["PUT", "/v1/hosts/{uuid}/hostagent"],
    ["POST", "/v4/{project_uuid}/hostAgentUpgrades"],
    ["GET", "/v4/{projectId}/externalClusters/discover"],
    ["POST", "/v4/{project_uuid}/cloudProviders/{uuid}/region/{regionid}/sshKey"],
  ])("documents %s %s", (method, url) => {
    expect(routes).toContainEqual({ method, url });
  });
});
