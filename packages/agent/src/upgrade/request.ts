/**
 * The self-upgrade request (`PUT /v1/hosts/<id>/hostagent` on the local API, or the
 * `agent.upgrade` command over the link): both entry points validate with this one function,
 * so a malformed request is refused the same way, naming the field, before anything happens.
 */
export interface UpgradeRequest {
  name: string;
  version: string;
  url: string;
  /** Lower-case hex; when absent the package's `<url>.sha256` is fetched. */
  sha256?: string;
}

export class UpgradeRequestError extends Error {
  override name = "UpgradeRequestError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** A version becomes a directory name under versions/, so it must be a safe path segment. */
export const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,127}$/;
const SHA256_PATTERN = /^[0-9a-fA-F]{64}$/;
const URL_SCHEMES = new Set(["http:", "https:", "file:"]);

export function validateUpgradeRequest(body: unknown): UpgradeRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new UpgradeRequestError("body", "must be a JSON object with name, version and url");
  }
  const input = body as Record<string, unknown>;
  const text = (field: string, max: number): string => {
    const value = input[field];
    if (value === undefined || value === null) throw new UpgradeRequestError(field, "is required");
    if (typeof value !== "string") throw new UpgradeRequestError(field, "must be a string");
    if (value.trim() === "") throw new UpgradeRequestError(field, "must not be empty");
    if (value.length > max) throw new UpgradeRequestError(field, `must be at most ${max} characters`);
    return value.trim();
  };
  const name = text("name", 255);
  const version = text("version", 128);
  if (!VERSION_PATTERN.test(version)) {
    throw new UpgradeRequestError("version", "must be letters, digits and . + _ - (for example 1.2.3)");
  }
  const url = text("url", 4096);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UpgradeRequestError("url", "must be an absolute http, https or file URL");
  }
  if (!URL_SCHEMES.has(parsed.protocol)) {
    throw new UpgradeRequestError("url", `scheme ${parsed.protocol} is not supported (http, https or file)`);
  }
  const request: UpgradeRequest = { name, version, url };
  if (input.sha256 !== undefined && input.sha256 !== null) {
    if (typeof input.sha256 !== "string" || !SHA256_PATTERN.test(input.sha256)) {
      throw new UpgradeRequestError("sha256", "must be 64 hexadecimal characters");
    }
    request.sha256 = input.sha256.toLowerCase();
  }
  return request;
}
