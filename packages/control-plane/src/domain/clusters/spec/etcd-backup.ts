/**
 * The nested `etcdBackup` object existing clients send on create and update (and that the v4
 * read shows): the same settings as the flat §2.1 backup fields, under other paths. This module
 * only maps its paths to the flat fields; the values go through the same coercion and rules.
 */
import { badRequest } from "../../../http/errors.ts";
import { isPlainObject, typeName } from "./coerce.ts";
import { CLUSTER_FIELDS, type FieldDef, type SpecField } from "./fields.ts";

export interface RawEntry {
  field: SpecField;
  raw: unknown;
  /** How the client named it, e.g. `etcdBackup.storageProperties.localPath`. */
  path: string;
}

/** Nested path -> flat field, from the field table. */
const BY_NESTED_PATH: ReadonlyMap<string, SpecField> = new Map(
  Object.entries(CLUSTER_FIELDS).flatMap(([name, field]: [string, FieldDef]): [string, SpecField][] =>
    field.nested === undefined ? [] : [[field.nested, name as SpecField]],
  ),
);

/** The nested path of a backup field (for messages about a field the client did not send). */
export function nestedPathOf(field: SpecField): string {
  const entry: FieldDef = CLUSTER_FIELDS[field];
  return entry.nested ?? `etcdBackup.${field}`;
}

function nestedEntry(key: string, raw: unknown, ignored: string[]): RawEntry[] {
  const path = `etcdBackup.${key}`;
  const field = BY_NESTED_PATH.get(path);
  if (field) return [{ field, raw, path }];
  ignored.push(path);
  return [];
}

/**
 * Flattens `etcdBackup`. Unknown keys (including the read-only `taskStatus`/`taskErrorDetail`
 * a client echoes back from a read) are not applied: their dotted paths go to `ignored`.
 */
export function flattenEtcdBackup(value: unknown, ignored: string[]): RawEntry[] {
  if (value === null || value === undefined) return [];
  if (!isPlainObject(value)) {
    throw badRequest("etcdBackup", `etcdBackup must be an object (got ${typeName(value)})`);
  }
  const entries: RawEntry[] = [];
  for (const [key, raw] of Object.entries(value)) {
    if (key === "storageProperties") {
      if (raw === null) continue;
      if (!isPlainObject(raw)) {
        throw badRequest(
          "etcdBackup.storageProperties",
          `etcdBackup.storageProperties must be an object (got ${typeName(raw)})`,
        );
      }
      for (const [inner, innerRaw] of Object.entries(raw))
        entries.push(...nestedEntry(`storageProperties.${inner}`, innerRaw, ignored));
    } else {
      entries.push(...nestedEntry(key, raw, ignored));
    }
  }
  return entries;
}
