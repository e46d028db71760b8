import { ApiError, badRequest } from "../../../http/errors.ts";

/**
 * What an AWS SDK failure means for the caller. The SDK throws two kinds: a service exception
 * (AWS answered; `$fault` is "client" or "server", `name` is AWS's error code) and everything
 * else (no connection, a reset, our own time limit), which says the cloud could not be reached.
 */
interface AwsFailure {
  name?: string;
  message?: string;
  code?: string;
  $fault?: "client" | "server";
}

/** AWS's codes for credentials it does not accept (STS, EC2, Route 53 and EKS name them alike or close). */
const REFUSED_CREDENTIALS = new Set([
  "InvalidClientTokenId",
  "SignatureDoesNotMatch",
  "InvalidSignatureException",
  "AuthFailure",
  "UnrecognizedClientException",
  "InvalidAccessKeyId",
  "ExpiredToken",
  "ExpiredTokenException",
  "RequestExpired",
  "MissingAuthenticationToken",
  "IncompleteSignature",
]);

/** The AWS error code of a service exception, or undefined when AWS did not answer. */
export function awsErrorCode(err: unknown): string | undefined {
  const failure = err as AwsFailure | null;
  return typeof failure?.$fault === "string" ? failure.name : undefined;
}

/** Keeps AWS's own words short and single-line in our message. */
function said(err: AwsFailure): string {
  return `${err.name}: ${(err.message ?? "").replace(/\s+/g, " ").slice(0, 300)}`;
}

/**
 * The API error for a failed call: refused credentials are the caller's to fix (400 on `key`),
 * an AWS outage or no answer at all is a 503, and any other refusal is a 400 with AWS's words.
 */
export function apiErrorOf(err: unknown, what: string, timeoutMs: number): ApiError {
  // Already decided by the caller (a duplicate key pair is a 409, for example).
  if (err instanceof ApiError) return err;
  const failure = (err ?? {}) as AwsFailure;
  if (failure.name === "TimeoutError" || failure.name === "AbortError") {
    return new ApiError(503, "cloud_unreachable", `AWS did not answer ${what} within ${timeoutMs} ms`);
  }
  const code = awsErrorCode(err);
  if (code === undefined) {
    const reason = failure.code ?? failure.message ?? String(err);
    return new ApiError(503, "cloud_unreachable", `AWS could not be reached for ${what}: ${reason}`);
  }
  if (REFUSED_CREDENTIALS.has(code)) {
    return badRequest("key", `AWS refused the credentials (${what}): ${said(failure)}`, "cloud_refused_credentials");
  }
  if (failure.$fault === "server") {
    return new ApiError(503, "cloud_unavailable", `AWS failed ${what}: ${said(failure)}`);
  }
  return new ApiError(400, "cloud_refused", `AWS refused ${what}: ${said(failure)}`);
}
