import { readFileSync } from "node:fs";
import { Agent } from "node:https";
import { rootCertificates } from "node:tls";
import { SubscriptionClient } from "@azure/arm-resources-subscriptions";
import { ClientSecretCredential } from "@azure/identity";
import type { ServerSettings } from "../../../settings.ts";
import { CloudClientCache, type KeptBy } from "../client-cache.ts";
import { cloudCall } from "../cloud-call.ts";
import { type Credentials, parseAzureSecret } from "../credentials.ts";
import type { Region } from "../regions.ts";
import { azureApiErrorOf } from "./errors.ts";
import { unknownTenant } from "./tenant.ts";

/**
 * Azure accounts through Azure's own SDK: @azure/identity's ClientSecretCredential gets a token
 * for Resource Manager from Microsoft Entra ID, and @azure/arm-resources-subscriptions lists the
 * subscription's locations. That package (not @azure/arm-subscriptions) because Microsoft moved
 * the subscription's own operations (locations, tenants) there: @azure/arm-subscriptions serves
 * subscription aliases and creation, and its releases since 5.0 no longer carry listLocations.
 * Listing the locations is also the credential check: it needs the token (the secret and the
 * tenant) and a role on the subscription, so a working account never fails it.
 */
export type AzureSettings = Pick<
  ServerSettings,
  "azureAuthorityHost" | "azureResourceManagerUrl" | "cloudCaFile" | "cloudCallTimeoutMs"
>;

const ARM_URL = "https://management.azure.com";
/** The token's audience: the public cloud's Resource Manager, also when another endpoint serves it. */
const ARM_SCOPE = "https://management.azure.com/.default";

/** The public CAs and KEELSON_CLOUD_CA_FILE's, when set (the SDK replaces Node's list with what it is given). */
function trustedCas(settings: AzureSettings): string[] | undefined {
  return settings.cloudCaFile ? [...rootCertificates, readFileSync(settings.cloudCaFile, "utf8")] : undefined;
}

/**
 * The account's credential and client, over one keep-alive agent of their own (the token
 * requests and Resource Manager's alike, for the SDK hands `agent` to both pipelines), which
 * `destroy` ends: the SDK's own agents could not be.
 */
function subscriptionClient(settings: AzureSettings, credentials: Credentials) {
  const secret = parseAzureSecret(credentials.secret);
  const ca = trustedCas(settings);
  const agent = new Agent({ keepAlive: true, ...(ca ? { ca } : {}) });
  const common = { agent, retryOptions: { maxRetries: 1 } };
  const credential = new ClientSecretCredential(secret.tenantId, credentials.key, secret.clientSecret, {
    ...common,
    ...(settings.azureAuthorityHost ? { authorityHost: settings.azureAuthorityHost } : {}),
    // Instance discovery asks login.microsoftonline.com about the authority: not for another host.
    disableInstanceDiscovery: settings.azureAuthorityHost !== undefined,
  });
  const endpoint = settings.azureResourceManagerUrl ?? ARM_URL;
  const client = new SubscriptionClient(credential, { ...common, endpoint, credentials: { scopes: [ARM_SCOPE] } });
  return {
    client,
    tenantId: secret.tenantId,
    subscriptionId: secret.subscriptionId,
    host: new URL(endpoint).host,
    ca,
    destroy: () => agent.destroy(),
  };
}

/**
 * The stored account's client, kept by the server (client-cache.ts) with the token its
 * credential got; without `kept`, one for this call only (a credential check).
 */
function accountClient(settings: AzureSettings, credentials: Credentials, kept?: KeptBy) {
  if (!kept) {
    const made = subscriptionClient(settings, credentials);
    return { ...made, release: made.destroy };
  }
  const key = CloudClientCache.keyOf(
    credentials.secret,
    "azure",
    kept.accountId,
    settings.azureAuthorityHost,
    settings.azureResourceManagerUrl,
    settings.cloudCaFile,
    credentials.key,
  );
  return { ...kept.clients.get(key, () => subscriptionClient(settings, credentials)), release: () => {} };
}

/** The subscription's physical regions (logical ones such as `eastusstg` hold no resources). */
export async function listAzureRegions(
  settings: AzureSettings,
  credentials: Credentials,
  kept?: KeptBy,
): Promise<Region[]> {
  const { client, tenantId, subscriptionId, host, ca, release } = accountClient(settings, credentials, kept);
  const what = "the subscription's locations (Resource Manager Subscriptions - List Locations)";
  const locations = await cloudCall(
    settings.cloudCallTimeoutMs,
    async (abortSignal) => {
      const found = [];
      try {
        for await (const location of client.subscriptions.listLocations(subscriptionId, { abortSignal })) {
          found.push(location);
        }
      } catch (err) {
        if ((err as Error).name !== "CredentialUnavailableError") throw err;
        throw (await unknownTenant(settings.azureAuthorityHost, tenantId, ca, abortSignal)) ?? err;
      }
      return found;
    },
    (err) => azureApiErrorOf(err, what, settings.cloudCallTimeoutMs),
  ).finally(release);
  return locations
    .filter((l) => l.name && (l.metadata?.regionType ?? "Physical") === "Physical")
    .map((l) => ({ RegionName: l.name ?? "", Endpoint: `${l.name}.${host}` }))
    .sort((a, b) => a.RegionName.localeCompare(b.RegionName));
}

/** Asks Entra ID for a token with these credentials, never a kept one (client-cache.ts says why). */
export async function checkAzureCredentials(settings: AzureSettings, credentials: Credentials): Promise<void> {
  await listAzureRegions(settings, credentials);
}
