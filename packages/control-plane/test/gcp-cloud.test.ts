import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  GCP_STANDIN,
  type GcpStandin,
  GOOGLE_TOKEN_URL,
  gcpKeys,
  startGcpStandin,
} from "../../../test/gcp-standin/server.ts";
import {
  expectAutoDeployRefused,
  expectClientKept,
  expectSlowCloudRefused,
  providerCounts,
} from "./cloud-account-checks.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/**
 * GCP accounts against the GCP stand-in (test/gcp-standin): the real google-auth-library signs
 * the assertion with the key file's private key and gets the token from the key's token_uri,
 * and the real @google-cloud/compute RegionsClient lists the regions over REST.
 */
describe("GCP accounts on Google's SDK", () => {
  let t: TestApp;
  let standin: GcpStandin;
  let gcp: string;
  const p = () => t.projectId;

  const counts = () => providerCounts(t);

  const post = (route: string, payload: Record<string, unknown>) =>
    t.request({ method: "POST", url: `/v3/${p()}/${route}`, payload });

  beforeAll(async () => {
    standin = await startGcpStandin();
    t = await createTestApp({ settings: { gcpComputeEndpoint: `${standin.url}/compute/v1/` } });
    const res = await post("cloudProviders", { name: "main", type: "gcp", ...gcpKeys(standin.tokenUri) });
    expect(res.statusCode, res.body).toBe(200);
    gcp = res.json().uuid;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await standin?.close();
  });

  it("validate gets a token from the key's token_uri with a signed assertion and lists the regions", async () => {
    const calls = standin.calls.length;
    const res = await post("cloudProviders/validate", { name: "check", type: "gcp", ...gcpKeys(standin.tokenUri) });
    expect(res.statusCode, res.body).toBe(200);
    const made = standin.calls.slice(calls);
    expect(made.map((c) => [c.method, c.path, c.status])).toEqual([
      ["POST", "/token", 200],
      ["GET", `/compute/v1/projects/${GCP_STANDIN.projectId}/regions`, 200],
    ]);
    expect(made[0]?.assertion).toMatchObject({
      header: { alg: "RS256" },
      claims: {
        iss: GCP_STANDIN.clientEmail,
        aud: GOOGLE_TOKEN_URL,
        scope: "https://www.googleapis.com/auth/compute.readonly",
      },
    });
  });

  it("the provider detail lists the project's regions from Compute Engine", async () => {
    const res = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${gcp}` });
    expect(res.statusCode, res.body).toBe(200);
    const host = new URL(standin.url).host;
    expect(res.json()).toEqual({
      Regions: ["asia-east1", "europe-west1", "us-central1"].map((RegionName) => ({ RegionName, Endpoint: host })),
    });
  });

  for (const [label, over, field, said] of [
    ["a key file signed with another key", { wrongKey: true }, "secret", "invalid_grant: Invalid JWT Signature."],
    [
      "a service account Google does not know",
      { clientEmail: "nobody@keelson-test-1.iam.gserviceaccount.com" },
      "secret",
      "invalid_grant: Invalid grant: account not found",
    ],
    ["a project Compute Engine does not hold", { projectId: "other-project-1" }, "key", "projects/other-project-1"],
  ] as const) {
    it(`validate and create answer 400 on ${field} for ${label}, quoting Google, and store nothing`, async () => {
      const before = await counts();
      for (const route of ["cloudProviders/validate", "cloudProviders"]) {
        const res = await post(route, { name: "refused", type: "gcp", ...gcpKeys(standin.tokenUri, over) });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toMatchObject({ code: "cloud_refused_credentials", field });
        expect(res.json().message).toContain(said);
        expect(res.body).not.toContain("PRIVATE KEY");
      }
      expect(await counts()).toEqual(before);
    });
  }

  it("keeps an account's client and its token between calls, and a new one for a re-key or a new account", async () => {
    const rekeyed = gcpKeys(standin.tokenUri, { secondKey: true }).secret;
    const tokenRequests = () => standin.calls.filter((c) => c.path === "/token" && c.status === 200).length;
    await expectClientKept(t, { type: "gcp", ...gcpKeys(standin.tokenUri), rekeyed }, tokenRequests);
  });

  it("answers 503 when GCP cannot be reached, and stores nothing", async () => {
    const before = await counts();
    const gone = await startGcpStandin();
    await gone.close();
    for (const route of ["cloudProviders/validate", "cloudProviders"]) {
      const res = await post(route, { name: "offline", type: "gcp", ...gcpKeys(gone.tokenUri) });
      expect(res.statusCode, res.body).toBe(503);
      expect(res.json().code).toBe("cloud_unreachable");
      expect(res.json().message).toContain("GCP could not be reached");
    }
    t.settings.gcpComputeEndpoint = `${gone.url}/compute/v1/`;
    try {
      const detail = await t.request({ method: "GET", url: `/v3/${p()}/cloudProviders/${gcp}` });
      expect(detail.statusCode, detail.body).toBe(503);
    } finally {
      t.settings.gcpComputeEndpoint = `${standin.url}/compute/v1/`;
    }
    expect(await counts()).toEqual(before);
  });

  it("a slow GCP does not hold a request past KEELSON_CLOUD_CALL_TIMEOUT_MS: 503, nothing stored", async () => {
    await expectSlowCloudRefused(t, standin, "GCP", () =>
      post("cloudProviders/validate", { name: "slow", type: "gcp", ...gcpKeys(standin.tokenUri) }),
    );
  });

  it("auto deploy on the account's node pool stays a 400 naming the types that have it", async () => {
    await expectAutoDeployRefused(t, gcp, "gcp");
  });
});
