/**
 * TypeBox schemas of the v4 and v3 cluster read records, for route response schemas and the
 * OpenAPI document: exactly CLUSTER_READ_KEYS_V4/V3, each with the wire type its presenter
 * field declares (presenters.ts), so a response serialiser built from them neither drops nor
 * retypes a field. The presenter tests still check real reads against these schemas.
 */
import { type TSchema, Type } from "typebox";
import type { ApiVersion } from "../spec/spec.ts";
import { CLUSTER_READ_KEYS_V3, CLUSTER_READ_KEYS_V4, type ReadType, readTypeOf } from "./presenters.ts";

const S = () => Type.String();
const I = () => Type.Integer();

const etcdBackupSchema = () =>
  Type.Object(
    {
      isEtcdBackupEnabled: I(),
      storageType: S(),
      storageProperties: Type.Object({ localPath: S() }, { additionalProperties: false }),
      intervalInMins: I(),
      intervalInHours: I(),
      dailyBackupTime: S(),
      maxIntervalBackupCount: I(),
      maxTimestampBackupCount: I(),
      taskStatus: Type.String({ description: "Whether the backup job was set up: success or error" }),
      taskErrorDetail: S(),
    },
    { additionalProperties: false },
  );

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
