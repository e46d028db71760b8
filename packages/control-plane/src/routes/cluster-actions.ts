import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { attachNodes } from "../domain/clusters/attach.ts";
import { detachNodes } from "../domain/clusters/detach.ts";
import { findCluster } from "../domain/clusters/views.ts";
import { notImplemented } from "../http/errors.ts";
import { sendNoBody } from "../http/no-body.ts";
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
  { minItems: 1, maxItems: 10_000, description: "Node attach/detach entries (spec §2.6)" },
);

const ATTACH_RULES =
  "Nodes of the project whose agent is connected and that are in no cluster; manual-deploy clusters only. " +
  "Several masters in one request only while the cluster has none (then one master per request: etcd grows " +
  "one member at a time); workers only once the cluster has a master or with masters in the same request. " +
  "Each violation is a 400 naming the entry (`[i].uuid`) and the rule; an unknown node or cluster is a 404; " +
  "nothing changes on any error. The nodes read as attached and `converging` at once; an operation " +
  "(`cluster.attach`) joins masters one at a time, then the workers, and settles the cluster's status.";
const DETACH_RULES =
  "Nodes attached to this cluster, each listed once with `isMaster` saying its role (400 otherwise; 404 for an " +
  "unknown node). Detaching masters that would lose etcd quorum is a 409 (`quorum_loss`) unless every node of " +
  "the cluster is detached: the remaining masters must keep a healthy majority, and workers need a master. " +
  "An operation (`cluster.detach`) drains, stops and cleans the workers, then the masters one at a time.";

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
 * Attach and detach (domain/clusters/attach.ts, detach.ts: rules, then an operation that runs
 * the node phases); upgrade and the staggered restarts: complete routes (schemas, auth,
 * validation, unknown-cluster 404) whose work comes in a later release.
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
            description: action === "attach" ? ATTACH_RULES : DETACH_RULES,
            params: ProjectClusterParams,
            body: AttachEntries,
            response: { 200: NoBody, ...clusterErrors },
          },
        },
        async (request, reply) => {
          const { project_uuid: projectId, uuid: clusterId } = request.params;
          const entries = request.body.map((e, i) => ({ uuid: e.uuid, isMaster: e.isMaster, field: `[${i}].uuid` }));
          if (action === "attach") attachNodes(k, projectId, clusterId, entries);
          else detachNodes(k, projectId, clusterId, entries);
          return sendNoBody(reply);
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
