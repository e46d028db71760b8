import { RegionsClient } from "@google-cloud/compute";
import { JWT } from "google-auth-library";
import type { ServerSettings } from "../../../settings.ts";
import { CloudClientCache, type KeptBy } from "../client-cache.ts";
import { cloudCall } from "../cloud-call.ts";
import { type Credentials, type GcpKeyFile, parseGcpKeyFile } from "../credentials.ts";
import type { Region } from "../regions.ts";
import { gcpApiErrorOf } from "./errors.ts";

/**
 * GCP accounts through Google's own SDK: @google-cloud/compute's RegionsClient over REST (its
 * HTTP/1 fallback: no gRPC), authorised by google-auth-library's JWT client with the
 * service-account key. Listing the regions is also the credential check: it needs a token (a
 * key Google signs for) and `compute.regions.list` on the project, so a working account never
 * fails it.
 */
export type GcpSettings = Pick<ServerSettings, "gcpComputeEndpoint" | "cloudCallTimeoutMs">;

/** Where google-auth-library sends every service-account token request, whatever the key says. */
const GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token";
const SCOPE = "https://www.googleapis.com/auth/compute.readonly";

/**
 * The JWT client of a key file. google-auth-library posts the signed assertion to Google's token
 * URL, hard-coded (its gtoken), so the transport sends that request to the key's own `token_uri`
 * instead: a private or test token endpoint is named by the key file, as Google documents it.
 * An explicit scope makes it ask the token endpoint rather than sign its own JWT per request.
 */
function jwtClient(key: GcpKeyFile): JWT {
  const client = new JWT({
    email: key.client_email,
    key: key.private_key,
    ...(key.private_key_id ? { keyId: key.private_key_id } : {}),
    scopes: [SCOPE],
  });
  const tokenUri = key.token_uri;
  if (tokenUri && tokenUri !== GOOGLE_TOKEN_URL) {
    client.transporter.interceptors.request.add({
      resolved: async (options) => {
        if (String(options.url) === GOOGLE_TOKEN_URL) options.url = new URL(tokenUri);
        return options;
      },
    });
  }
  return client;
}

/** The REST endpoint as RegionsClient takes it: host, port and protocol apart. */
function endpointOptions(settings: GcpSettings) {
  if (!settings.gcpComputeEndpoint) return {};
  const url = new URL(settings.gcpComputeEndpoint);
  const protocol = url.protocol.replace(":", "");
  return {
    apiEndpoint: url.hostname,
    port: Number(url.port || (protocol === "http" ? 80 : 443)),
    protocol,
  };
}

/** A RegionsClient with its JWT client, which keeps the token it got until it runs out. */
function regionsClient(settings: GcpSettings, credentials: Credentials) {
  const client = new RegionsClient({
    ...endpointOptions(settings),
    fallback: true,
    authClient: jwtClient(parseGcpKeyFile(credentials.secret)),
  });
  // Closed when the cache drops it; a failure to close is nothing to report then.
  return { client, destroy: () => void client.close().catch(() => {}) };
}

/**
 * The stored account's client, kept by the server (client-cache.ts); without `kept`, one for
 * this call only (a credential check).
 */
function accountClient(settings: GcpSettings, credentials: Credentials, kept?: KeptBy) {
  if (!kept) {
    const made = regionsClient(settings, credentials);
    return { client: made.client, release: () => made.client.close() };
  }
  const key = CloudClientCache.keyOf(
    credentials.secret,
    "gcp",
    kept.accountId,
    settings.gcpComputeEndpoint,
    credentials.key,
  );
  const { client } = kept.clients.get(key, () => regionsClient(settings, credentials));
  return { client, release: async () => {} };
}

/** The project's regions (Compute Engine regions.list), each with the API host that serves it. */
export async function listGcpRegions(
  settings: GcpSettings,
  credentials: Credentials,
  kept?: KeptBy,
): Promise<Region[]> {
  const { client, release } = accountClient(settings, credentials, kept);
  const host = settings.gcpComputeEndpoint ? new URL(settings.gcpComputeEndpoint).host : "compute.googleapis.com";
  const what = "the project's regions (Compute Engine regions.list)";
  try {
    const regions = await cloudCall(
      settings.cloudCallTimeoutMs,
      async (signal) => {
        const found: string[] = [];
        // One attempt: the request's own time limit is the caller's, and a retry would outlive it.
        const options = { retry: null, timeout: settings.cloudCallTimeoutMs, otherArgs: { signal } };
        for await (const region of client.listAsync({ project: credentials.key }, options)) {
          if (region.name) found.push(region.name);
        }
        return found;
      },
      (err) => gcpApiErrorOf(err, what, settings.cloudCallTimeoutMs),
    );
    return regions.sort().map((name) => ({ RegionName: name, Endpoint: host }));
  } finally {
    await release();
  }
}

/** Asks Google for a token with this key, never a kept one (client-cache.ts says why). */
export async function checkGcpCredentials(settings: GcpSettings, credentials: Credentials): Promise<void> {
  await listGcpRegions(settings, credentials);
}
