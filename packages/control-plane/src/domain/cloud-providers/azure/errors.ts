import { ApiError, badRequest } from "../../../http/errors.ts";

/**
 * What an Azure SDK failure means for the caller. @azure/identity wraps Entra ID's refusal in an
 * AuthenticationRequiredError whose `cause` is MSAL's ServerError (`errorCode` is Entra's
 * `error`, `errorMessage` carries its AADSTS description); Resource Manager's answers are
 * RestErrors with `statusCode` and ARM's `code`. No status at all means Azure was not reached
 * (no connection, TLS refused, our own time limit). An unknown tenant is told apart from an
 * unreachable Entra ID by account.ts (MSAL reports both as `endpoints_resolution_error`).
 */
interface AzureFailure {
  name?: string;
  message?: string;
  code?: string;
  statusCode?: number;
  cause?: { errorCode?: string; errorMessage?: string };
}

/** Entra ID's errors for credentials it does not take, and the field that holds the culprit. */
const REFUSED_BY_ENTRA: Record<string, "key" | "secret"> = {
  invalid_client: "secret", // AADSTS7000215: wrong secret; AADSTS7000222: expired secret
  unauthorized_client: "key", // AADSTS700016: no such application in the tenant
};

/** Resource Manager's refusals of the token or the subscription. */
const REFUSED_BY_ARM = new Set([
  "InvalidAuthenticationToken",
  "InvalidAuthenticationTokenTenant",
  "AuthorizationFailed",
  "SubscriptionNotFound",
]);

const short = (text: string | undefined) => (text ?? "").replace(/\s+/g, " ").slice(0, 300);

export function azureApiErrorOf(err: unknown, what: string, timeoutMs: number): ApiError {
  if (err instanceof ApiError) return err;
  const failure = (err ?? {}) as AzureFailure;
  if (failure.name === "TimeoutError" || failure.name === "AbortError") {
    return new ApiError(503, "cloud_unreachable", `Azure did not answer ${what} within ${timeoutMs} ms`);
  }
  const status = failure.statusCode;
  const entra = failure.cause?.errorCode;
  const field = entra === undefined ? undefined : REFUSED_BY_ENTRA[entra];
  if (field) {
    // MSAL puts Entra's description after "Description: "; the AADSTS code leads it.
    const description = failure.cause?.errorMessage?.split("Description: ")[1] ?? failure.cause?.errorMessage;
    const said = `${entra}: ${short(description)}`;
    return badRequest(field, `Azure refused the credentials (${what}): ${said}`, "cloud_refused_credentials");
  }
  if (status === undefined || status === 0) {
    return new ApiError(503, "cloud_unreachable", `Azure could not be reached for ${what}: ${short(failure.message)}`);
  }
  if (status >= 500) return new ApiError(503, "cloud_unavailable", `Azure failed ${what}: ${short(failure.message)}`);
  if (failure.code && REFUSED_BY_ARM.has(failure.code)) {
    return badRequest(
      "secret",
      `Azure refused the credentials (${what}): ${failure.code}: ${short(failure.message)}`,
      "cloud_refused_credentials",
    );
  }
  return new ApiError(
    400,
    "cloud_refused",
    `Azure refused ${what}: ${failure.code ?? status}: ${short(failure.message)}`,
  );
}
