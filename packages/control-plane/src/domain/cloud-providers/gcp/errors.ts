import { ApiError, badRequest } from "../../../http/errors.ts";

/**
 * What a GCP SDK failure means for the caller. A token refused by Google's token endpoint comes
 * from google-auth-library as a GaxiosError whose message it rewrote to `error: description`
 * (`invalid_grant: Invalid JWT Signature.`) with the HTTP status in `status`; Compute Engine's
 * refusals come from google-gax as GoogleErrors whose `code` is the gRPC status it maps the HTTP
 * status to (google-gax's rpcCodeFromHttpStatusCode) and whose message is Google's. No status
 * means Google was not reached (no connection, our own time limit).
 */
interface GcpFailure {
  name?: string;
  message?: string;
  code?: number | string;
  status?: number;
  response?: { status?: number };
}

/** The token endpoint's words for a key it does not take (RFC 6749 §5.2, as Google answers them). */
const REFUSED_KEY = /^(invalid_grant|invalid_client|unauthorized_client):/;

/**
 * gRPC status codes (google.rpc.Code) back to the HTTP statuses they stand for. UNAVAILABLE (14)
 * is also what google-gax reports when it could not connect at all, so it counts as not reached.
 */
const HTTP_OF_RPC_CODE: Record<number, number> = { 3: 400, 4: 504, 5: 404, 7: 403, 9: 400, 13: 500, 14: 0, 16: 401 };

const short = (text: string | undefined) => (text ?? "").replace(/\s+/g, " ").slice(0, 300);

export function gcpApiErrorOf(err: unknown, what: string, timeoutMs: number): ApiError {
  if (err instanceof ApiError) return err;
  const failure = (err ?? {}) as GcpFailure;
  if (failure.name === "TimeoutError" || failure.name === "AbortError") {
    return new ApiError(503, "cloud_unreachable", `GCP did not answer ${what} within ${timeoutMs} ms`);
  }
  const message = short(failure.message);
  if (REFUSED_KEY.test(failure.message ?? "")) {
    return badRequest("secret", `GCP refused the credentials (${what}): ${message}`, "cloud_refused_credentials");
  }
  const rpcCode = typeof failure.code === "number" ? HTTP_OF_RPC_CODE[failure.code] : undefined;
  const status = failure.response?.status ?? failure.status ?? rpcCode ?? 0;
  if (status === 401 || status === 403) {
    return badRequest("secret", `GCP refused the credentials (${what}): ${message}`, "cloud_refused_credentials");
  }
  if (status === 404) {
    return badRequest("key", `GCP does not know the project (${what}): ${message}`, "cloud_refused_credentials");
  }
  if (status >= 500) return new ApiError(503, "cloud_unavailable", `GCP failed ${what}: ${message}`);
  if (status >= 400) return new ApiError(400, "cloud_refused", `GCP refused ${what}: ${message}`);
  return new ApiError(503, "cloud_unreachable", `GCP could not be reached for ${what}: ${message}`);
}
