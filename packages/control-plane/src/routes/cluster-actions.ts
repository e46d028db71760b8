import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { findCluster } from "../domain/clusters/views.ts";
import { notImplemented } from "../http/errors.ts";
import { clusterErrors, ProjectClusterParams, ProjectParams } from "./cluster-schemas.ts";
import { ErrorBody, NoBody } from "./common-schemas.ts";

const AttachEntries = Type.Array(
  Type.Object(
    {
      uuid: Type.String({ minLength: 1, description: "Node UUID" }),
      isMaster: Type.Boolean({ description: "true to attach as a master" }),
    },
    { additionalProperties: false },
  ),
  { minItems: 1, description: "Node attach/detach entries (spec §2.6)" },
);

const UpgradeQueryV4 = Type.Object({
  type: Type.Union([Type.Literal("minor"), Type.Literal("patch")], { description: "Which upgrade target to go to" }),
  force: Type.Optional(Type.Boolean({ default: false, description: "Upgrade even when the cluster is unhealthy" })),
});

const upgradeCommon = {
  batchUpgradePercent: Type.Optional(
    Type.Number({ minimum: 1, maximum: 100, description: "Percent of workers upgraded in parallel (1-100)" }),
  ),
  containerRuntime: Type.Optional(Type.Union([Type.Literal("docker"), Type.Literal("containerd")])),
  addonOperatorImageTag: Type.Optional(Type.String()),
  addonVersions: Type.Optional(Type.Object({}, { additionalProperties: true })),
};
const UpgradeBodyV4 = Type.Object(
  {
    ...upgradeCommon,
    batchUpgradeNodes: Type.Optional(
      Type.Array(Type.String(), { description: "Worker node UUIDs upgraded together first" }),
    ),
  },
  { additionalProperties: false },
);
const UpgradeBodyV3 = Type.Object(upgradeCommon, { additionalProperties: false });

const laterIssue = (what: string) =>
  notImplemented(`${what} needs the node phases and orchestration, which come in a later release`);

/**
 * Attach, detach, upgrade and the staggered restarts: complete routes (schemas, auth,
 * validation, unknown-cluster 404) whose work lands with the node phases.
 */
export const clusterActionRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;

  for (const version of ["v4", "v3"] as const) {
    const tags = [`clusters ${version}`];
    for (const action of ["attach", "detach"] as const) {
      app.post(
        `/${version}/:project_uuid/clusters/:uuid/${action}`,
        {
          schema: {
            tags,
            summary: `${action === "attach" ? "Attach nodes to" : "Detach nodes from"} a manual-deploy cluster`,
            params: ProjectClusterParams,
            body: AttachEntries,
            response: { 200: NoBody, ...clusterErrors },
          },
        },
        async (request) => {
          findCluster(k.db, request.params.project_uuid, request.params.uuid);
          throw laterIssue(action === "attach" ? "attaching nodes" : "detaching nodes");
        },
      );
    }

    app.post(
      `/${version}/:project_uuid/clusters/:uuid/upgrade`,
      {
        schema: {
          tags,
          summary: `Upgrade a cluster (${version})`,
          params: ProjectClusterParams,
          ...(version === "v4" ? { querystring: UpgradeQueryV4 } : {}),
          body: Type.Optional(version === "v4" ? UpgradeBodyV4 : UpgradeBodyV3),
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request) => {
        findCluster(k.db, request.params.project_uuid, request.params.uuid);
        throw laterIssue("upgrading a cluster");
      },
    );
  }

  for (const action of ["restart", "restartWorkers", "restartMasters"] as const) {
    app.post(
      `/v3/:project_uuid/clusters/:uuid/${action}`,
      {
        schema: {
          tags: ["clusters v3"],
          summary: `Staggered ${action === "restart" ? "restart of every node" : action === "restartWorkers" ? "restart of the workers" : "restart of the masters"}`,
          params: ProjectClusterParams,
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request) => {
        findCluster(k.db, request.params.project_uuid, request.params.uuid);
        throw laterIssue("a staggered restart");
      },
    );
  }

  app.get(
    "/v3/:project_uuid/currentRollingRestarts",
    {
      schema: {
        tags: ["clusters v3"],
        summary: "Nodes of the rolling restarts in progress",
        params: ProjectParams,
        response: {
          200: Type.Array(Type.Object({ name: Type.String(), runState: Type.Boolean() })),
          403: ErrorBody,
          501: ErrorBody,
        },
      },
    },
    async () => {
      throw laterIssue("listing rolling restarts");
    },
  );
};
