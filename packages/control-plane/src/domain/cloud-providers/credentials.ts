import { checkHttpUrl } from "@keelson/settings";
import { badRequest } from "../../http/errors.ts";
import type { ProviderType } from "./provider-types.ts";

/**
 * Shape checks of cloud credentials, per provider type. They catch what is malformed (a pasted
 * secret access key in the key field, a truncated secret, a key file that is not a service
 * account) before anything is stored. Whether the credentials actually work only the cloud can
 * say (cloud-checks.ts asks it).
 *
 * Error messages name the field and the rule and never echo the value: these are secrets.
 */
export interface Credentials {
  key: string;
  secret: string;
}

/** An AWS access key id: AKIA (long-term) or ASIA (temporary) and 16 upper-case letters or digits. */
const AWS_ACCESS_KEY_ID = /^(AKIA|ASIA)[A-Z0-9]{16}$/;
/** An AWS secret access key: 40 characters of base64 alphabet. */
const AWS_SECRET_ACCESS_KEY = /^[A-Za-z0-9/+=]{40}$/;
/** An Azure application (client) id: a GUID. */
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** A GCP project id: 6-30 characters, lower-case letters, digits and hyphens, starting with a letter. */
const GCP_PROJECT_ID = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
const MAX_SECRET_LENGTH = 16_384;

export const CREDENTIAL_RULES = {
  aws: "key: an access key id (AKIA or ASIA followed by 16 upper-case letters or digits); secret: the 40-character secret access key",
  azure:
    'key: the application (client) id, a GUID; secret: the service principal\'s credentials as `az ad sp create-for-rbac --sdk-auth` prints them, JSON with "clientSecret", "tenantId" and "subscriptionId" (GUIDs)',
  gcp: 'key: the GCP project id (6-30 lower-case letters, digits, hyphens); secret: the service-account key file, JSON with "type": "service_account", "client_email" and "private_key" (its "token_uri", Google\'s token endpoint if absent, is where its tokens come from)',
} as const;

function checkAwsKey(key: string): void {
  if (!AWS_ACCESS_KEY_ID.test(key)) {
    throw badRequest(
      "key",
      "key must be an AWS access key id: AKIA or ASIA followed by 16 upper-case letters or digits",
    );
  }
}

function checkAwsSecret(secret: string): void {
  if (!AWS_SECRET_ACCESS_KEY.test(secret)) {
    throw badRequest("secret", "secret must be an AWS secret access key: 40 characters of A-Z, a-z, 0-9, / + =");
  }
}

function checkAzureKey(key: string): void {
  if (!GUID.test(key)) throw badRequest("key", "key must be the Azure application (client) id, a GUID");
}

/** What Azure needs besides the client id: `az ad sp create-for-rbac --sdk-auth`'s JSON (other fields ignored). */
export interface AzureSecret {
  clientSecret: string;
  tenantId: string;
  subscriptionId: string;
}

/** The Azure secret's fields; a 400 on `secret` naming the rule when one is missing or malformed. */
export function parseAzureSecret(secret: string, key?: string): AzureSecret {
  const rule =
    'secret must be the service principal\'s credentials JSON ("clientSecret", "tenantId", "subscriptionId")';
  let file: Record<string, unknown>;
  try {
    file = JSON.parse(secret) as Record<string, unknown>;
  } catch {
    throw badRequest("secret", `${rule}; it does not parse as JSON`);
  }
  if (typeof file !== "object" || file === null || Array.isArray(file)) throw badRequest("secret", rule);
  if (typeof file.clientSecret !== "string" || file.clientSecret.trim() === "") {
    throw badRequest("secret", `${rule}: "clientSecret" is missing`);
  }
  for (const field of ["tenantId", "subscriptionId"] as const) {
    if (typeof file[field] !== "string" || !GUID.test(file[field])) {
      throw badRequest("secret", `${rule}: "${field}" must be a GUID`);
    }
  }
  // Credentials of another application than the one in `key` are almost always a paste mistake.
  if (key !== undefined && typeof file.clientId === "string" && file.clientId.toLowerCase() !== key.toLowerCase()) {
    throw badRequest(
      "secret",
      'secret is the credentials of another application than the client id in key ("clientId")',
    );
  }
  return {
    clientSecret: file.clientSecret,
    tenantId: file.tenantId as string,
    subscriptionId: file.subscriptionId as string,
  };
}

function checkGcpKey(key: string): void {
  if (!GCP_PROJECT_ID.test(key)) {
    throw badRequest(
      "key",
      "key must be a GCP project id: 6-30 lower-case letters, digits and hyphens, starting with a letter",
    );
  }
}

/** The fields of a service-account key file Keelson uses. */
export interface GcpKeyFile {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  /** Where the key's tokens come from (Google's token endpoint for its own keys). */
  token_uri?: string;
  project_id?: string;
}

/** A service-account key file's fields; a 400 on `secret` naming the rule when it is not one. */
export function parseGcpKeyFile(secret: string, key?: string): GcpKeyFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(secret);
  } catch {
    throw badRequest("secret", "secret must be a GCP service-account key file (JSON); it does not parse as JSON");
  }
  const file = parsed as Record<string, unknown> | null;
  if (typeof file !== "object" || file === null || Array.isArray(file) || file.type !== "service_account") {
    throw badRequest(
      "secret",
      'secret must be a GCP service-account key file: a JSON object with "type": "service_account"',
    );
  }
  for (const field of ["client_email", "private_key"] as const) {
    if (typeof file[field] !== "string" || file[field] === "") {
      throw badRequest("secret", `secret must be a GCP service-account key file: "${field}" is missing`);
    }
  }
  if (file.token_uri !== undefined && (typeof file.token_uri !== "string" || checkHttpUrl(file.token_uri))) {
    throw badRequest("secret", 'secret must be a GCP service-account key file: "token_uri" must be an http(s) URL');
  }
  // A key file of another project than the one named in `key` is almost always a paste mistake.
  if (key !== undefined && typeof file.project_id === "string" && file.project_id !== key) {
    throw badRequest("secret", "secret is a service-account key file of another project than the one in key");
  }
  return file as unknown as GcpKeyFile;
}

function checkLength(field: "key" | "secret", value: string): void {
  if (value.length > MAX_SECRET_LENGTH) {
    throw badRequest(field, `${field} is longer than ${MAX_SECRET_LENGTH} characters`);
  }
}

/**
 * Checks the credential fields that are present. Create and validate pass both; an update may
 * re-key with only one of them, which is then checked on its own.
 */
export function checkCredentials(type: Exclude<ProviderType, "local">, creds: Partial<Credentials>): void {
  const { key, secret } = creds;
  if (key !== undefined) checkLength("key", key);
  if (secret !== undefined) checkLength("secret", secret);
  switch (type) {
    case "aws":
      if (key !== undefined) checkAwsKey(key);
      if (secret !== undefined) checkAwsSecret(secret);
      return;
    case "azure":
      if (key !== undefined) checkAzureKey(key);
      if (secret !== undefined) parseAzureSecret(secret, key);
      return;
    case "gcp":
      if (key !== undefined) checkGcpKey(key);
      if (secret !== undefined) parseGcpKeyFile(secret, key);
      return;
  }
}
