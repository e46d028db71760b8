import { badRequest } from "../../http/errors.ts";

/**
 * Input rules shared by the identity endpoints. Routes validate the same bounds in their
 * schemas (so they appear in the OpenAPI document); these checks keep the domain functions
 * safe when called from elsewhere (CLI, tests, other modules).
 */

/** Printable text without leading/trailing blanks: a name an operator can read back and type. */
export function requireDisplayName(field: string, value: string, maxLength: number): string {
  if (value.length < 1 || value.length > maxLength) {
    throw badRequest(field, `${field} must be 1 to ${maxLength} characters long`);
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw badRequest(field, `${field} must not contain control characters`);
  }
  if (value.trim() !== value) {
    throw badRequest(field, `${field} must not start or end with whitespace`);
  }
  return value;
}

export function requireIntegerInRange(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw badRequest(field, `${field} must be an integer from ${min} to ${max}`);
  }
  return value;
}

export function addMinutes(now: Date, minutes: number): string {
  return new Date(now.getTime() + minutes * 60_000).toISOString();
}

/** Expiry timestamps are ISO-8601 UTC strings; a missing one never expires. */
export function isExpired(expiresAt: string | null, now: Date): boolean {
  return expiresAt !== null && Date.parse(expiresAt) <= now.getTime();
}
