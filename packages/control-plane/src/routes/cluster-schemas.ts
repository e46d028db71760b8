import { Type } from "typebox";
import { ErrorBody } from "./common-schemas.ts";

export const ProjectClusterParams = Type.Object({
  project_uuid: Type.String({ description: "Project UUID" }),
  uuid: Type.String({ description: "Cluster UUID" }),
});

export const FieldValidationQuery = Type.Object({
  fieldValidation: Type.Optional(
    Type.Union([Type.Literal("Strict"), Type.Literal("Warn"), Type.Literal("Ignore")], {
      description:
        "What to do with fields this version does not take on this request: Warn (default) ignores them and names " +
        "each in a Warning header, Strict answers 400, Ignore ignores them silently.",
    }),
  ),
});

/**
 * The create/update bodies are checked by the cluster domain (domain/clusters/spec/spec.ts), which knows
 * the per-version field sets, the compatibility coercions and the §4.8 rules and names the field
 * in every error. The schema here documents the shape and only insists on a JSON object.
 */
export const ClusterWriteBody = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      "Cluster create or update fields of spec §2.1 for this version. 0/1 flags also take booleans, numeric " +
      "strings (mtuSize, k8sApiPort, calicoV4BlockSize) also take numbers, and `etcdBackup` may be given nested. " +
      "On create, `masterNodes` and `workerNodes` (arrays of node uuids) attach those nodes.",
  },
);

export const CreatedCluster = Type.Object({ uuid: Type.String() });

export const clusterErrors = { 400: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };
