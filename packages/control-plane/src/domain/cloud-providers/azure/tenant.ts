import { request } from "node:https";
import { badRequest } from "../../../http/errors.ts";

const AUTHORITY_HOST = "https://login.microsoftonline.com";

/**
 * Whether Entra ID says it has no such tenant. MSAL reports a tenant Entra ID does not know and an
 * Entra ID it cannot reach alike (`endpoints_resolution_error`: the tenant's OpenID configuration
 * could not be read), so after that failure this reads the document itself: Entra ID answers it
 * with 400 `invalid_tenant` (AADSTS90002) for an unknown tenant. Returns the 400 to answer, or
 * undefined when Entra ID does not say that (then it was not reached: a 503).
 */
export async function unknownTenant(
  authorityHost: string | undefined,
  tenantId: string,
  ca: (string | Buffer)[] | undefined,
  signal: AbortSignal,
): Promise<Error | undefined> {
  const url = new URL(
    `${(authorityHost ?? AUTHORITY_HOST).replace(/\/+$/, "")}/${tenantId}/v2.0/.well-known/openid-configuration`,
  );
  if (url.protocol !== "https:") return undefined;
  const answer = await new Promise<{ status: number; body: string } | undefined>((resolve) => {
    const req = request(url, { ...(ca ? { ca } : {}), signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", () => resolve(undefined));
    });
    req.on("error", () => resolve(undefined));
    req.end();
  });
  if (answer?.status !== 400) return undefined;
  let said: { error?: string; error_description?: string };
  try {
    said = JSON.parse(answer.body) as typeof said;
  } catch {
    return undefined;
  }
  if (said.error !== "invalid_tenant") return undefined;
  const description = (said.error_description ?? "").replace(/\s+/g, " ").slice(0, 300);
  return badRequest(
    "secret",
    `Azure refused the credentials (the tenant's OpenID configuration): invalid_tenant: ${description}`,
    "cloud_refused_credentials",
  );
}
