import { generateKeyPairSync, randomBytes, randomUUID, verify } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * STAND-IN, for tests: the two GCP endpoints Keelson calls, on loopback over plain HTTP. It is
 * not Google; it follows the published protocols:
 * - Google's OAuth 2.0 token endpoint for service accounts ("Using OAuth 2.0 for Server to Server
 *   Applications", RFC 7523): `POST /token`, form-encoded, `grant_type` =
 *   `urn:ietf:params:oauth:grant-type:jwt-bearer` and an RS256 `assertion` whose `iss` is the
 *   service account, `aud` Google's token URL (https://oauth2.googleapis.com/token, what Google
 *   checks, whatever host serves it here) and `scope` set; its signature is verified with the
 *   account's public key. Refusals are 400 with Google's bodies: `invalid_grant` "Invalid JWT
 *   Signature." (another key), "Invalid grant: account not found", `invalid_scope`,
 *   `unsupported_grant_type`.
 * - Compute Engine API v1 (REST reference, regions.list):
 *   `GET /compute/v1/projects/{project}/regions` with a Bearer token this stand-in issued,
 *   answering `compute#regionList`; errors `{"error":{"code","message","errors","status"}}`:
 *   401 UNAUTHENTICATED, 404 for a project it does not hold.
 */
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const other = generateKeyPairSync("rsa", { modulusLength: 2048 });
/**
 * A second key of the same service account: an account holds up to 10 keys, each valid until
 * deleted (IAM docs, "Create and delete service account keys"; rotating is creating a new key,
 * then deleting the old). The assertion's `kid` names the key it was signed with.
 */
const second = {
  ...generateKeyPairSync("rsa", { modulusLength: 2048 }),
  id: "7a6b5c4d3e2f10293847566574839201a2b3c4d5",
};

export const GCP_STANDIN = {
  projectId: "keelson-test-1",
  clientEmail: "deployer@keelson-test-1.iam.gserviceaccount.com",
  privateKeyId: "1f2e3d4c5b6a79880706f5e4d3c2b1a0918f7e6d",
};

export const GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token";
export const GCP_REGIONS = ["us-central1", "europe-west1", "asia-east1"];

/**
 * A key file of the stand-in's account whose tokens come from `tokenUri`; `wrongKey` signs with
 * another key (not the account's), `secondKey` with the account's second key.
 */
export function gcpKeys(
  tokenUri: string,
  over: { wrongKey?: boolean; secondKey?: boolean; clientEmail?: string; projectId?: string } = {},
) {
  const key = over.wrongKey ? other.privateKey : over.secondKey ? second.privateKey : privateKey;
  const projectId = over.projectId ?? GCP_STANDIN.projectId;
  return {
    key: projectId,
    secret: JSON.stringify({
      type: "service_account",
      project_id: projectId,
      private_key_id: over.secondKey ? second.id : GCP_STANDIN.privateKeyId,
      private_key: key.export({ type: "pkcs8", format: "pem" }),
      client_email: over.clientEmail ?? GCP_STANDIN.clientEmail,
      client_id: "104857600000000000001",
      auth_uri: "https://accounts.google.com/o/oauth2/auth",
      token_uri: tokenUri,
    }),
  };
}

export interface GcpCall {
  method: string;
  path: string;
  status: number;
  /** The token request's assertion, decoded (header and claims). */
  assertion?: { header: Record<string, unknown>; claims: Record<string, unknown> };
}

export interface GcpStandin {
  url: string;
  tokenUri: string;
  calls: GcpCall[];
  latencyMs: number;
  close(): Promise<void>;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=UTF-8" });
  res.end(JSON.stringify(body));
}

const grantError = (res: ServerResponse, error: string, description: string) =>
  json(res, 400, { error, error_description: description });

function computeError(res: ServerResponse, code: number, status: string, message: string, reason: string): void {
  json(res, code, { error: { code, message, errors: [{ message, domain: "global", reason }], status } });
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

const decode = (part: string) => JSON.parse(Buffer.from(part, "base64url").toString("utf8")) as Record<string, unknown>;

export async function startGcpStandin(): Promise<GcpStandin> {
  const tokens = new Set<string>();
  const calls: GcpCall[] = [];
  const token = (res: ServerResponse, call: GcpCall, body: string) => {
    const form = new URLSearchParams(body);
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") {
      return grantError(res, "unsupported_grant_type", "Invalid grant_type: " + (form.get("grant_type") ?? ""));
    }
    const parts = (form.get("assertion") ?? "").split(".");
    if (parts.length !== 3) return grantError(res, "invalid_request", "Invalid JWT: could not parse.");
    let header: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      header = decode(parts[0] as string);
      claims = decode(parts[1] as string);
    } catch {
      return grantError(res, "invalid_request", "Invalid JWT: could not parse.");
    }
    call.assertion = { header, claims };
    if (header.alg !== "RS256") return grantError(res, "invalid_grant", "Invalid JWT Signature.");
    if (claims.iss !== GCP_STANDIN.clientEmail)
      return grantError(res, "invalid_grant", "Invalid grant: account not found");
    const signed = Buffer.from(`${parts[0]}.${parts[1]}`);
    // The key `kid` names, or (no kid) any of the account's.
    const accountKeys = { [GCP_STANDIN.privateKeyId]: publicKey, [second.id]: second.publicKey };
    const candidates = typeof header.kid === "string" ? [accountKeys[header.kid]] : Object.values(accountKeys);
    const signature = Buffer.from(parts[2] as string, "base64url");
    if (!candidates.some((key) => key && verify("RSA-SHA256", signed, key, signature))) {
      return grantError(res, "invalid_grant", "Invalid JWT Signature.");
    }
    const now = Math.floor(Date.now() / 1000);
    if (claims.aud !== GOOGLE_TOKEN_URL) return grantError(res, "invalid_grant", "Invalid JWT: Failed audience check.");
    if (
      typeof claims.exp !== "number" ||
      typeof claims.iat !== "number" ||
      claims.exp < now ||
      claims.exp - claims.iat > 3600
    ) {
      return grantError(
        res,
        "invalid_grant",
        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.",
      );
    }
    if (typeof claims.scope !== "string" || claims.scope === "") {
      return grantError(res, "invalid_scope", "Invalid OAuth scope or ID token audience provided.");
    }
    const access = `ya29.${randomBytes(24).toString("base64url")}`;
    tokens.add(access);
    json(res, 200, { access_token: access, expires_in: 3599, token_type: "Bearer" });
  };

  const regions = (req: IncomingMessage, res: ServerResponse, project: string, base: string) => {
    const bearer = (req.headers.authorization ?? "").match(/^Bearer (.+)$/)?.[1];
    if (!bearer || !tokens.has(bearer)) {
      return computeError(
        res,
        401,
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        "authError",
      );
    }
    if (project !== GCP_STANDIN.projectId) {
      return computeError(res, 404, "NOT_FOUND", `The resource 'projects/${project}' was not found`, "notFound");
    }
    const self = `${base}/compute/v1/projects/${project}/regions`;
    json(res, 200, {
      kind: "compute#regionList",
      id: `projects/${project}/regions`,
      items: GCP_REGIONS.map((name, i) => ({
        kind: "compute#region",
        id: String(1000 + i),
        name,
        description: name,
        status: "UP",
        zones: [`${base}/compute/v1/projects/${project}/zones/${name}-a`],
        selfLink: `${self}/${name}`,
      })),
      selfLink: self,
    });
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", standin.url);
    const call: GcpCall = { method: req.method ?? "", path: url.pathname, status: 0 };
    calls.push(call);
    res.on("finish", () => {
      call.status = res.statusCode;
    });
    void (async () => {
      const body = await bodyOf(req);
      if (standin.latencyMs > 0) await new Promise((r) => setTimeout(r, standin.latencyMs));
      if (req.method === "POST" && url.pathname === "/token") return token(res, call, body);
      const project = url.pathname.match(/^\/compute\/v1\/projects\/([^/]+)\/regions$/)?.[1];
      if (req.method === "GET" && project) return regions(req, res, project, standin.url);
      computeError(res, 404, "NOT_FOUND", `no such endpoint: ${req.method} ${url.pathname}`, "notFound");
    })().catch((err: unknown) => json(res, 500, { error: { code: 500, message: String(err) }, id: randomUUID() }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const standin: GcpStandin = {
    url: `http://127.0.0.1:${port}`,
    tokenUri: `http://127.0.0.1:${port}/token`,
    calls,
    latencyMs: 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return standin;
}
