/**
 * Coercion of one JSON value to the one type a cluster field is stored with. Existing clients
 * send 0/1 fields as booleans and booleans as 0/1, and numeric strings (mtuSize, k8sApiPort,
 * calicoV4BlockSize) as numbers; those are accepted and normalised. Anything else of the wrong
 * type is a 400 naming the field and the expected type, never silently converted.
 */
import { badRequest } from "../../../http/errors.ts";

export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function wrongType(path: string, expected: string, value: unknown) {
  return badRequest(path, `${path} must be ${expected} (got ${typeName(value)})`);
}

export interface Range {
  min?: number;
  max?: number;
}

function checkRange(n: number, path: string, range: Range): void {
  const { min, max } = range;
  if (min !== undefined && max !== undefined && (n < min || n > max)) {
    throw badRequest(path, `${path} must be between ${min} and ${max} (got ${n})`);
  }
  if (min !== undefined && n < min) throw badRequest(path, `${path} must be at least ${min} (got ${n})`);
  if (max !== undefined && n > max) throw badRequest(path, `${path} must be at most ${max} (got ${n})`);
}

export function toStringValue(value: unknown, path: string, maxLength: number): string {
  if (typeof value !== "string") throw wrongType(path, "a string", value);
  if (value.length > maxLength) throw badRequest(path, `${path} must be at most ${maxLength} characters`);
  return value;
}

export function toInteger(value: unknown, path: string, range: Range): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw wrongType(path, "an integer", value);
  checkRange(value, path, range);
  return value;
}

/** A 1/0 integer flag; `true`/`false` are accepted because clients send them. */
export function toFlag(value: unknown, path: string): 0 | 1 {
  if (value === true || value === 1) return 1;
  if (value === false || value === 0) return 0;
  throw badRequest(path, `${path} must be 1 or 0 (or a boolean) (got ${JSON.stringify(value) ?? typeName(value)})`);
}

/**
 * A boolean; 1/0 are accepted because clients send them. `text` also accepts "true"/"false",
 * for a field the read returns as a string, so what a client read it can send back.
 */
export function toBoolean(value: unknown, path: string, text = false): boolean {
  if (value === true || value === 1 || (text && value === "true")) return true;
  if (value === false || value === 0 || (text && value === "false")) return false;
  throw badRequest(path, `${path} must be a boolean (or 1/0) (got ${JSON.stringify(value) ?? typeName(value)})`);
}

/**
 * A string that holds a whole number. Numbers are accepted; both normalise to the canonical
 * decimal string, so `1440`, `"1440"` and `"01440"` are stored alike.
 */
export function toNumericString(value: unknown, path: string, range: Range): string {
  let n: number;
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw wrongType(path, "a whole number or a string of digits", value);
    n = value;
  } else if (typeof value === "string") {
    if (!/^\d{1,15}$/.test(value)) {
      throw badRequest(path, `${path} must be a whole number or a string of digits (got "${value}")`);
    }
    n = Number(value);
  } else {
    throw wrongType(path, "a whole number or a string of digits", value);
  }
  checkRange(n, path, range);
  return String(n);
}

export function toStringArray(value: unknown, path: string, maxLength: number): string[] {
  if (!Array.isArray(value)) throw wrongType(path, "an array of strings", value);
  return value.map((item, i) => {
    const itemPath = `${path}[${i}]`;
    if (typeof item !== "string" || item === "") throw wrongType(itemPath, "a non-empty string", item);
    if (item.length > maxLength) throw badRequest(itemPath, `${itemPath} must be at most ${maxLength} characters`);
    return item;
  });
}

/** A JSON object whose values are all strings (tags, addonVersions). */
export function toStringMap(value: unknown, path: string, maxLength: number): Record<string, string> {
  if (!isPlainObject(value)) throw wrongType(path, "an object of string values", value);
  const entries = Object.entries(value);
  for (const [key, item] of entries) {
    const itemPath = `${path}.${key}`;
    if (key === "") throw badRequest(path, `${path} must not have an empty key`);
    if (typeof item !== "string") throw wrongType(itemPath, "a string", item);
    if (item.length > maxLength) throw badRequest(itemPath, `${itemPath} must be at most ${maxLength} characters`);
  }
  // fromEntries defines own properties, so a tag named "__proto__" stays a tag.
  return Object.fromEntries(entries) as Record<string, string>;
}
