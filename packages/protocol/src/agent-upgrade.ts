import { Type } from "typebox";
import { AGENT_VERSION_PATTERN } from "./agent-package.ts";

/**
 * The host-agent self-upgrade request, in one place for every side that handles it: the
 * control plane's `PUT /v1/hosts/{uuid}/hostagent` body, the `agent.upgrade` command payload it
 * relays, and the agent's local API (`PUT /v1/hosts/<id>/hostagent` on 8082). The schema
 * describes it on the wire and in the OpenAPI document; `validateUpgradeRequest` is the same
 * rules with messages that name the field, for the agent that acts on it.
 */

const NAME_MAX = 255;
const VERSION_MAX = 128;
const URL_MAX = 4096;
const SHA256_PATTERN = "^[0-9a-fA-F]{64}$";
const URL_SCHEMES = ["http:", "https:", "file:"];

export const AgentUpgradeRequest = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: NAME_MAX, description: "Package name, e.g. keelson-agent" }),
    version: Type.String({
      // A version becomes a directory name under versions/, so it must be a safe path segment.
      pattern: AGENT_VERSION_PATTERN,
      maxLength: VERSION_MAX,
      description: "Version to install: letters, digits and . + _ -",
    }),
    url: Type.String({
      minLength: 1,
      maxLength: URL_MAX,
      pattern: "^(https?|file):",
      description: "http, https or file URL of the package (a tarball built by `pnpm pack:agent`)",
    }),
    sha256: Type.Optional(
      Type.String({
        pattern: SHA256_PATTERN,
        description: "sha256 of the package; without it the agent reads <url>.sha256",
      }),
    ),
  },
  { additionalProperties: false },
);

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

/** The request checked and normalised (trimmed, lower-case sha256); UpgradeRequestError names the field. */
export function validateUpgradeRequest(body: unknown): UpgradeRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new UpgradeRequestError("body", "must be a JSON object with name, version and url");
  }
  const input = body as Record<string, unknown>;
  const text = (field: string, max: number): string => {
    const value = input[field];
    if (value === undefined || value === null) throw new UpgradeRequestError(field, "is required");
    if (typeof value !== "string") throw new UpgradeRequestError(field, "must be a string");
    // The name and version end up in paths and logs: text a file system or log line can hold.
    if (!value.isWellFormed()) {
      throw new UpgradeRequestError(field, "must be valid Unicode text (it holds an unpaired surrogate)");
    }
    if (value.trim() === "") throw new UpgradeRequestError(field, "must not be empty");
    if (value.length > max) throw new UpgradeRequestError(field, `must be at most ${max} characters`);
    return value.trim();
  };
  const name = text("name", NAME_MAX);
  const version = text("version", VERSION_MAX);
  if (!new RegExp(AGENT_VERSION_PATTERN).test(version)) {
    throw new UpgradeRequestError("version", "must be letters, digits and . + _ - (for example 1.2.3)");
  }
  const url = text("url", URL_MAX);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UpgradeRequestError("url", "must be an absolute http, https or file URL");
  }
  if (!URL_SCHEMES.includes(parsed.protocol)) {
    throw new UpgradeRequestError("url", `scheme ${parsed.protocol} is not supported (http, https or file)`);
  }
  const request: UpgradeRequest = { name, version, url };
  if (input.sha256 !== undefined && input.sha256 !== null) {
    if (typeof input.sha256 !== "string" || !new RegExp(SHA256_PATTERN).test(input.sha256)) {
      throw new UpgradeRequestError("sha256", "must be 64 hexadecimal characters");
    }
    request.sha256 = input.sha256.toLowerCase();
  }
  return request;
}
