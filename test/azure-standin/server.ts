import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { issue, makeCa } from "../support/kube-pki.ts";

/**
 * STAND-IN, for tests: the two Azure endpoints Keelson calls, on loopback over HTTPS (the Azure
 * SDK sends tokens over TLS only, and MSAL takes https authorities only), with a CA of its own
 * (`caFile`, for KEELSON_CLOUD_CA_FILE). It is not Azure; it follows the published protocols:
 * - Microsoft Entra ID (Microsoft identity platform docs, "OAuth 2.0 client credentials flow" and
 *   "OpenID Connect"): `GET /{tenant}/v2.0/.well-known/openid-configuration` (400 `invalid_tenant`
 *   AADSTS90002 for an unknown tenant) and `POST /{tenant}/oauth2/v2.0/token`, form-encoded,
 *   `grant_type=client_credentials`, `client_id`, `client_secret` and a `scope` of
 *   `<resource>/.default`. A wrong secret is 401 `invalid_client` AADSTS7000215, an unknown
 *   application 400 `unauthorized_client` AADSTS700016, a wrong scope 400 `invalid_scope`
 *   AADSTS1002012, with Entra's error body (error, error_description, error_codes, timestamp,
 *   trace_id, correlation_id).
 * - Azure Resource Manager (REST reference, Subscriptions - List Locations, api-version
 *   2022-12-01): `GET /subscriptions/{id}/locations?api-version=…` with `Authorization: Bearer`
 *   of a token this stand-in issued for that subscription's tenant; errors
 *   `{"error":{"code","message"}}`: 401 `InvalidAuthenticationToken`, 404 `SubscriptionNotFound`,
 *   400 `MissingApiVersionParameter`.
 */
export const AZURE_STANDIN = {
  tenantId: "72f988bf-86f1-41af-91ab-2d7cd011db47",
  clientId: "0f8fad5b-d9cb-469f-a165-70867728950e",
  clientSecret: "Qx8Q~standin.client-secret_value",
  subscriptionId: "3a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
};

/**
 * A second secret of the same application: an app registration holds several client secrets,
 * each valid until it expires or is removed (Microsoft identity platform docs, "Add
 * credentials": rotating a secret is adding a new one, then removing the old).
 */
export const AZURE_SECOND_SECRET = "Zr7P~standin.second-secret_value";

/** The account as a Keelson provider body takes it: the secret is `az ad sp create-for-rbac --sdk-auth`'s JSON. */
export function azureKeys(over: Partial<typeof AZURE_STANDIN> = {}) {
  const a = { ...AZURE_STANDIN, ...over };
  return {
    key: a.clientId,
    secret: JSON.stringify({
      clientId: a.clientId,
      clientSecret: a.clientSecret,
      subscriptionId: a.subscriptionId,
      tenantId: a.tenantId,
    }),
  };
}

const ARM_SCOPE = "https://management.azure.com/.default";

/** What the subscription's locations answer holds: two physical regions and one logical. */
export const AZURE_LOCATIONS = [
  { name: "westeurope", displayName: "West Europe", regionType: "Physical" },
  { name: "eastus", displayName: "East US", regionType: "Physical" },
  { name: "eastusstg", displayName: "East US (Stage)", regionType: "Logical" },
];

export interface AzureCall {
  method: string;
  path: string;
  status: number;
  /** The form of a token request (client_secret left out). */
  form?: Record<string, string>;
}

export interface AzureStandin {
  url: string;
  caFile: string;
  calls: AzureCall[];
  /** Added before every answer. */
  latencyMs: number;
  close(): Promise<void>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(body));
}

function entraError(res: ServerResponse, status: number, error: string, code: number, text: string): void {
  const now = new Date()
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
  const traceId = randomUUID();
  const correlationId = randomUUID();
  json(res, status, {
    error,
    error_description: `AADSTS${code}: ${text} Trace ID: ${traceId} Correlation ID: ${correlationId} Timestamp: ${now}`,
    error_codes: [code],
    timestamp: now,
    trace_id: traceId,
    correlation_id: correlationId,
    error_uri: `https://login.microsoftonline.com/error?code=${code}`,
  });
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startAzureStandin(): Promise<AzureStandin> {
  const dir = mkdtempSync(join(tmpdir(), "azure-standin-"));
  const ca = makeCa(dir, "azure-standin-ca");
  const tls = issue(dir, ca, { cn: "127.0.0.1", ips: ["127.0.0.1"] });
  /** Tokens issued: token → tenant. */
  const tokens = new Map<string, string>();
  const calls: AzureCall[] = [];

  const handle = async (req: IncomingMessage, res: ServerResponse, base: string): Promise<void> => {
    const url = new URL(req.url ?? "/", base);
    const call: AzureCall = { method: req.method ?? "", path: url.pathname, status: 0 };
    calls.push(call);
    res.on("finish", () => {
      call.status = res.statusCode;
    });
    if (standin.latencyMs > 0) await new Promise((r) => setTimeout(r, standin.latencyMs));
    const openid = url.pathname.match(/^\/([^/]+)\/v2\.0\/\.well-known\/openid-configuration$/);
    if (req.method === "GET" && openid) {
      const tenant = openid[1] ?? "";
      if (tenant !== AZURE_STANDIN.tenantId) {
        return entraError(res, 400, "invalid_tenant", 90002, `Tenant '${tenant}' not found.`);
      }
      return json(res, 200, {
        token_endpoint: `${base}/${tenant}/oauth2/v2.0/token`,
        authorization_endpoint: `${base}/${tenant}/oauth2/v2.0/authorize`,
        end_session_endpoint: `${base}/${tenant}/oauth2/v2.0/logout`,
        issuer: `${base}/${tenant}/v2.0`,
        jwks_uri: `${base}/${tenant}/discovery/v2.0/keys`,
        token_endpoint_auth_methods_supported: ["client_secret_post", "private_key_jwt", "client_secret_basic"],
        response_types_supported: ["code", "id_token", "code id_token", "id_token token"],
        scopes_supported: ["openid", "profile", "email", "offline_access"],
      });
    }
    const token = url.pathname.match(/^\/([^/]+)\/oauth2\/v2\.0\/token$/);
    if (req.method === "POST" && token) {
      const form = Object.fromEntries(new URLSearchParams(await bodyOf(req)));
      const { client_secret: secret, ...shown } = form;
      call.form = shown;
      if (token[1] !== AZURE_STANDIN.tenantId) {
        return entraError(res, 400, "invalid_request", 90002, `Tenant '${token[1]}' not found.`);
      }
      if (form.grant_type !== "client_credentials") {
        return entraError(res, 400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.");
      }
      if (form.client_id !== AZURE_STANDIN.clientId) {
        return entraError(
          res,
          400,
          "unauthorized_client",
          700016,
          `Application with identifier '${form.client_id}' was not found in the directory '${token[1]}'.`,
        );
      }
      const scopes = (form.scope ?? "").split(" ").filter((s) => s.endsWith("/.default"));
      if (scopes.length !== 1 || scopes[0] !== ARM_SCOPE) {
        return entraError(
          res,
          400,
          "invalid_scope",
          1002012,
          `The provided value for scope ${form.scope} is not valid.`,
        );
      }
      if (secret !== AZURE_STANDIN.clientSecret && secret !== AZURE_SECOND_SECRET) {
        return entraError(
          res,
          401,
          "invalid_client",
          7000215,
          `Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '${form.client_id}'.`,
        );
      }
      const access = randomBytes(24).toString("base64url");
      tokens.set(access, token[1]);
      return json(res, 200, { token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: access });
    }
    const locations = url.pathname.match(/^\/subscriptions\/([^/]+)\/locations$/);
    if (req.method === "GET" && locations) {
      const bearer = (req.headers.authorization ?? "").match(/^Bearer (.+)$/)?.[1];
      if (!bearer || !tokens.has(bearer)) {
        res.setHeader(
          "www-authenticate",
          'Bearer authorization_uri="https://login.windows.net/", error="invalid_token"',
        );
        return json(res, 401, {
          error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." },
        });
      }
      if (!url.searchParams.get("api-version")) {
        return json(res, 400, {
          error: {
            code: "MissingApiVersionParameter",
            message: "The api-version query parameter (?api-version=) is required for all requests.",
          },
        });
      }
      const id = locations[1];
      if (id !== AZURE_STANDIN.subscriptionId) {
        return json(res, 404, {
          error: { code: "SubscriptionNotFound", message: `The subscription '${id}' could not be found.` },
        });
      }
      return json(res, 200, {
        value: AZURE_LOCATIONS.map((l) => ({
          id: `/subscriptions/${id}/locations/${l.name}`,
          name: l.name,
          type: "Region",
          displayName: l.displayName,
          regionalDisplayName: l.displayName,
          metadata: { regionType: l.regionType, regionCategory: "Recommended" },
        })),
      });
    }
    json(res, 404, { error: { code: "NotFound", message: `no such endpoint: ${req.method} ${url.pathname}` } });
  };

  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    handle(req, res, standin.url).catch((err: unknown) => json(res, 500, { error: String(err) }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const standin: AzureStandin = {
    url: `https://127.0.0.1:${port}`,
    caFile: ca.certFile,
    calls,
    latencyMs: 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return standin;
}
