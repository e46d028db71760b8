/**
 * TypeBox schemas of the v4 and v3 cluster read records, for route response schemas and the
 * OpenAPI document: exactly CLUSTER_READ_KEYS_V4/V3, each with the wire type its presenter
 * field declares (presenters.ts), so a response serialiser built from them neither drops nor
 * retypes a field. The presenter tests still check real reads against these schemas.
 */
import { type TSchema, Type } from "typebox";
import type { ApiVersion } from "../spec/fields.ts";
import {
  CLUSTER_READ_KEYS_V3,
  CLUSTER_READ_KEYS_V4,
  NESTED_BACKUP_READS,
  type ReadType,
  readTypeOf,
  setAtPath,
} from "./presenters.ts";

const S = () => Type.String();
const I = () => Type.Integer();

interface TypeTree {
  [key: string]: TypeTree | ReadType;
}

function objectSchema(tree: TypeTree): TSchema {
  const properties: Record<string, TSchema> = {};
  for (const [key, type] of Object.entries(tree)) {
    properties[key] = typeof type === "string" ? schemaOf(type, "v4") : objectSchema(type);
  }
  return Type.Object(properties, { additionalProperties: false });
}

/** v4's nested `etcdBackup`: the table's nested backup fields and the backup job's status. */
function etcdBackupSchema(): TSchema {
  const tree: TypeTree = {};
  for (const { path, type } of NESTED_BACKUP_READS) setAtPath(tree, path, type);
  // The backup job's status and detail: the read's second `taskStatus` (success or error).
  return objectSchema({ ...tree, taskStatus: "string", taskErrorDetail: "string" });
}

function schemaOf(type: ReadType, version: ApiVersion): TSchema {
  switch (type) {
    case "string":
      return S();
    case "integer":
      return I();
    case "boolean":
      return Type.Boolean();
    case "natOutgoing":
      return version === "v4" ? Type.Boolean() : I();
    case "strings":
      return Type.Array(S());
    case "stringMap":
      return Type.Record(Type.String(), Type.String());
    case "stringOrNull":
      return Type.Union([S(), Type.Null()]);
    case "etcdBackup":
      return etcdBackupSchema();
  }
}

function readSchema(version: ApiVersion, keys: readonly string[]) {
  const properties: Record<string, TSchema> = {};
  for (const key of keys) properties[key] = schemaOf(readTypeOf(key), version);
  return Type.Object(properties, { additionalProperties: false, description: `Cluster record (${version} read set)` });
}

export const clusterReadSchemaV4 = readSchema("v4", CLUSTER_READ_KEYS_V4);
export const clusterReadSchemaV3 = readSchema("v3", CLUSTER_READ_KEYS_V3);
