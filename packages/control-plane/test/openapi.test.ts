import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "./helpers.ts";

/** The spec's endpoints and Keelson's extensions appear in /openapi.json with their methods. */
describe("OpenAPI document", () => {
  let t: TestApp;
  const routes: { method: string; url: string }[] = [];
  let doc: { paths: Record<string, Record<string, { security?: unknown[] }>> };
  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    doc = (await t.request({ method: "GET", url: "/openapi.json", token: null })).json();
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
    ["GET", "/v1/webcli/session"],
    ["GET", "/v4/{project_uuid}/operations"],
    ["GET", "/v4/{project_uuid}/events"],
    ["POST", "/keystone/v3/auth/tokens"],
    ["POST", "/v1/projects/{projectId}/joinTokens"],
    ["POST", "/v1/agents/register"],
    ["GET", "/v1/hosts/{uuid}"],
    ["PUT", "/v1/hosts/{uuid}/hostagent"],
    ["POST", "/v4/{project_uuid}/hostAgentUpgrades"],
    ["GET", "/v4/{projectId}/externalClusters/discover"],
    ["POST", "/v4/{projectId}/externalClusters/register"],
    ["GET", "/v1/projects/{projectId}/externalClusters"],
    ["POST", "/v4/{projectId}/externalClusters/{clusterID}/deregister"],
    ["GET", "/v4/{projectId}/externalClusters/{clusterID}/deploymentYAML"],
  ])("documents %s %s", (method, url) => {
    expect(routes).toContainEqual({ method, url });
  });

  it("says which operations need no token: exactly the public ones, package downloads included", () => {
    const open = Object.entries(doc.paths)
      .flatMap(([path, methods]) =>
        Object.entries(methods)
          .filter(([, op]) => Array.isArray(op.security) && op.security.length === 0)
          .map(([method]) => `${method.toUpperCase()} ${path}`),
      )
      .sort();
    expect(open).toEqual(
      [
        "GET /healthz",
        "GET /readyz",
        "GET /v1/ca",
        "GET /v1/install/agent.sh",
        "POST /keystone/v3/auth/tokens",
        "POST /v1/agents/register",
        "GET /v1/webcli/session",
        "GET /v1/agentPackages/{version}/package.tar.gz",
        "GET /v1/agentPackages/{version}/package.tar.gz.sha256",
        "GET /v1/nodePackages/{version}/package.tar.gz",
        "GET /v1/nodePackages/{version}/package.tar.gz.sha256",
        "GET /v1/imageArchives/{sha256}/archive.tar",
      ].sort(),
    );
    // Everything else inherits the document's X-Auth-Token requirement.
    const secured = Object.values(doc.paths).flatMap((methods) => Object.values(methods));
    expect(secured.filter((op) => op.security === undefined).length).toBeGreaterThan(50);
  });

  it("describes the web CLI's WebSocket with the frames both sides check, and answers a plain GET 426", async () => {
    const op = doc.paths["/v1/webcli/session"]?.get as unknown as {
      responses: Record<string, unknown>;
      "x-keelson-websocket": { clientFrames: { anyOf: { properties: { type: { const: string } } }[] } };
    };
    expect(Object.keys(op.responses).sort()).toEqual(["101", "426"]);
    const ws = op["x-keelson-websocket"];
    expect(ws.clientFrames.anyOf.map((f) => f.properties.type.const)).toEqual(["auth", "input", "resize"]);
    const plain = await t.request({ method: "GET", url: "/v1/webcli/session", token: null });
    expect(plain.statusCode).toBe(426);
    expect(plain.headers.upgrade).toBe("websocket");
    expect(plain.json()).toEqual({ code: "upgrade_required", message: expect.stringMatching(/WebSocket/) });
  });
});
