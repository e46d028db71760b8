import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AZURE_SECOND_SECRET,
  AZURE_STANDIN,
  type AzureStandin,
  azureKeys,
  startAzureStandin,
} from "../../../test/azure-standin/server.ts";
import {
  expectAutoDeployRefused,
  expectClientKept,
  expectSlowCloudRefused,
  providerCounts,
} from "./cloud-account-checks.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/**
 * Azure accounts against the Azure stand-in (test/azure-standin): the real @azure/identity gets
 * the token from the stand-in's Entra ID endpoint and the real ARM client lists the
 * subscription's locations from its Resource Manager endpoint, over TLS with the stand-in's CA.
 */
describe("Azure accounts on the Azure SDK", () => {
  let t: TestApp;
  let standin: AzureStandin;
  let azure: string;
  const p = () => t.projectId;

  const counts = () => providerCounts(t);

  const post = (version: "v3" | "v4", route: string, payload: Record<string, unknown>) =>
    t.request({ method: "POST", url: `/${version}/${p()}/${route}`, payload });

  beforeAll(async () => {
    standin = await startAzureStandin();
    t = await createTestApp({
      settings: {
        azureAuthorityHost: standin.url,
        azureResourceManagerUrl: standin.url,
        cloudCaFile: standin.caFile,
      },
    });
    const res = await post("v3", "cloudProviders", { name: "main", type: "azure", ...azureKeys() });
    expect(res.statusCode, res.body).toBe(200);
    azure = res.json().uuid;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await standin?.close();
  });

  it("validate gets a token with the client credentials and lists the subscription's locations", async () => {
    const calls = standin.calls.length;
    const res = await post("v3", "cloudProviders/validate", { name: "check", type: "azure", ...azureKeys() });
    expect(res.statusCode, res.body).toBe(200);
    const made = standin.calls.slice(calls);
    const token = made.find((c) => c.path.endsWith("/oauth2/v2.0/token"));
    expect(token).toMatchObject({
      method: "POST",
      path: `/${AZURE_STANDIN.tenantId}/oauth2/v2.0/token`,
      status: 200,
      form: { grant_type: "client_credentials", client_id: AZURE_STANDIN.clientId },
    });
    expect(token?.form?.scope?.split(" ")).toContain("https://management.azure.com/.default");
    expect(made.at(-1)).toMatchObject({
      method: "GET",
      path: `/subscriptions/${AZURE_STANDIN.subscriptionId}/locations`,
      status: 200,
    });
  });

  it("the provider detail lists the subscription's physical regions from Resource Manager", async () => {
    const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${azure}` });
    expect(res.statusCode, res.body).toBe(200);
    const host = new URL(standin.url).host;
    expect(res.json()).toEqual({
      Regions: [
        { RegionName: "eastus", Endpoint: `eastus.${host}` },
        { RegionName: "westeurope", Endpoint: `westeurope.${host}` },
      ],
    });
  });

  for (const [label, over, field, said] of [
    ["a wrong client secret", { clientSecret: "wrong~secret" }, "secret", "invalid_client: AADSTS7000215"],
    [
      "an application the tenant does not know",
      { clientId: "11111111-2222-4333-8444-555555555555" },
      "key",
      "unauthorized_client: AADSTS700016",
    ],
    ["a tenant Entra ID does not know", { tenantId: "99999999-2222-4333-8444-555555555555" }, "secret", "AADSTS90002"],
    [
      "a subscription Resource Manager does not know",
      { subscriptionId: "99999999-2222-4333-8444-555555555555" },
      "secret",
      "SubscriptionNotFound",
    ],
  ] as const) {
    it(`validate and create answer 400 on ${field} for ${label}, quoting Azure, and store nothing`, async () => {
      const before = await counts();
      const keys = azureKeys(over);
      for (const route of ["cloudProviders/validate", "cloudProviders"]) {
        const res = await post("v3", route, { name: "refused", type: "azure", ...keys });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toMatchObject({ code: "cloud_refused_credentials", field });
        expect(res.json().message).toContain("Azure refused the credentials");
        expect(res.json().message).toContain(said);
        expect(res.body).not.toContain("wrong~secret");
      }
      expect(await counts()).toEqual(before);
    });
  }

  it("keeps an account's credential and its token between calls, and a new one for a re-key or a new account", async () => {
    const rekeyed = azureKeys({ clientSecret: AZURE_SECOND_SECRET }).secret;
    const tokenRequests = () =>
      standin.calls.filter((c) => c.path.endsWith("/oauth2/v2.0/token") && c.status === 200).length;
    await expectClientKept(t, { type: "azure", ...azureKeys(), rekeyed }, tokenRequests);
  });

  it("a re-key Azure refuses answers 400 and keeps the account's regions working", async () => {
    const res = await t.request({
      method: "PUT",
      url: `/v4/cloudProviders/${azure}`,
      payload: { secret: azureKeys({ clientSecret: "wrong~secret" }).secret },
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: "cloud_refused_credentials", field: "secret" });
    const detail = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${azure}` });
    expect(detail.statusCode).toBe(200);
  });

  it("answers 400 naming the field for a secret that is not the credentials JSON, asking nothing", async () => {
    const calls = standin.calls.length;
    for (const secret of ["plain-secret", JSON.stringify({ clientSecret: "x", tenantId: "t" })]) {
      const res = await post("v3", "cloudProviders/validate", {
        name: "c",
        type: "azure",
        key: AZURE_STANDIN.clientId,
        secret,
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().field).toBe("secret");
    }
    expect(standin.calls.length).toBe(calls);
  });

  it("answers 503 when Azure cannot be reached, and stores nothing", async () => {
    const before = await counts();
    const gone = await startAzureStandin();
    const closed = gone.url;
    await gone.close();
    t.settings.azureAuthorityHost = closed;
    t.settings.azureResourceManagerUrl = closed;
    try {
      for (const route of ["cloudProviders/validate", "cloudProviders"]) {
        const res = await post("v3", route, { name: "offline", type: "azure", ...azureKeys() });
        expect(res.statusCode, res.body).toBe(503);
        expect(res.json().code).toBe("cloud_unreachable");
        expect(res.json().message).toContain("Azure could not be reached");
      }
      const detail = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${azure}` });
      expect(detail.statusCode, detail.body).toBe(503);
    } finally {
      t.settings.azureAuthorityHost = standin.url;
      t.settings.azureResourceManagerUrl = standin.url;
    }
    expect(await counts()).toEqual(before);
  });

  it("a slow Azure does not hold a request past KEELSON_CLOUD_CALL_TIMEOUT_MS: 503, nothing stored", async () => {
    await expectSlowCloudRefused(t, standin, "Azure", () =>
      post("v3", "cloudProviders/validate", { name: "slow", type: "azure", ...azureKeys() }),
    );
  });

  it("auto deploy on the account's node pool stays a 400 naming the types that have it", async () => {
    await expectAutoDeployRefused(t, azure, "azure");
  });
});
