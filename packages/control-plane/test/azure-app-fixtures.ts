import { type AzureStandin, azureKeys, startAzureStandin } from "../../../test/azure-standin/server.ts";
import type { TestApp } from "./helpers.ts";

/**
 * Points `t` at a fresh Azure stand-in (its settings are the app's, mutable in tests) and creates
 * the Azure account `name` in its project, checked with the stand-in like any Azure account.
 * The caller closes the stand-in.
 */
export async function addAzureAccount(t: TestApp, name = "az"): Promise<{ azure: string; azureStandin: AzureStandin }> {
  const azureStandin = await startAzureStandin();
  t.settings.azureAuthorityHost = azureStandin.url;
  t.settings.azureResourceManagerUrl = azureStandin.url;
  t.settings.cloudCaFile = azureStandin.caFile;
  const res = await t.request({
    method: "POST",
    url: `/v3/${t.projectId}/cloudProviders`,
    payload: { name, type: "azure", ...azureKeys() },
  });
  if (res.statusCode !== 200) throw new Error(`the Azure account was not created: ${res.body}`);
  return { azure: res.json().uuid, azureStandin };
}
