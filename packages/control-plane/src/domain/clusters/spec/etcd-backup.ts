/**
 * The nested `etcdBackup` object existing clients send on create and update (and that the v4
 * read shows): the same settings as the flat §2.1 backup fields, under other paths. This module
 * only maps its paths to the flat fields; the values go through the same coercion and rules.
 */
import { badRequest } from "../../../http/errors.ts";
import { isPlainObject, typeName } from "./coerce.ts";
import type { SpecField } from "./fields.ts";

export interface RawEntry {
  field: SpecField;
  raw: unknown;
  /** How the client named it, e.g. `etcdBackup.storageProperties.localPath`. */
  path: string;
}

const NESTED_FIELDS: ReadonlySet<string> = new Set<SpecField>([
  "isEtcdBackupEnabled",
  "storageType",
  "intervalInMins",
  "intervalInHours",
  "dailyBackupTime",
  "maxIntervalBackupCount",
  "maxTimestampBackupCount",
]);

/** The nested path of a backup field (for messages about a field the client did not send). */
export function nestedPathOf(field: SpecField): string {
  return field === "localPath" ? "etcdBackup.storageProperties.localPath" : `etcdBackup.${field}`;
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
      for (const [inner, innerRaw] of Object.entries(raw)) {
        if (inner === "localPath") entries.push({ field: "localPath", raw: innerRaw, path: nestedPathOf("localPath") });
        else ignored.push(`etcdBackup.storageProperties.${inner}`);
      }
    } else if (NESTED_FIELDS.has(key)) {
      entries.push({ field: key as SpecField, raw, path: `etcdBackup.${key}` });
    } else {
      ignored.push(`etcdBackup.${key}`);
    }
  }
  return entries;
}
