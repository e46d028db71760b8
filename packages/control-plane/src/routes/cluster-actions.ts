import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { changeMembership } from "../domain/clusters/membership/change.ts";
import { currentRollingRestarts } from "../domain/clusters/rollouts/rollout.ts";
import { type RestartScope, startRestart, startUpgrade } from "../domain/clusters/rollouts/rollout-requests.ts";
import { sendNoBody } from "../http/no-body.ts";
import { clusterErrors, ProjectClusterParams } from "./cluster-schemas.ts";
import { ErrorBody, MEMBER, NoBody, ProjectUuidParams, READER } from "./common-schemas.ts";

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

const UPGRADE_RULES =
  "Target: v4 `type=patch` -> patchUpgradeRoleVersion, `type=minor` -> minorUpgradeRoleVersion; v3 (no query) " +
  "goes to the patch target when there is one, else the minor target. No such target in the catalogue: 400 " +
  "(`no_upgrade_target`). A cluster with a master or a node not ok: 400 (`cluster_unhealthy`) unless v4 " +
  "`force=true`. `batchUpgradePercent` 1-100 (default 10; batches are that percent of the workers rounded down, " +
  "at least 1); v4 `batchUpgradeNodes` must each be a worker of the cluster (400 naming `batchUpgradeNodes[i]`). " +
  "A restart, upgrade, attach or detach still running on the cluster: 409 (`cluster_busy`). The operation " +
  "(`cluster.upgrade`) upgrades masters one at a time, then the batchUpgradeNodes together, then the other " +
  "workers in batches; each node's actualKubeRoleVersion moves once it is back ok (written with the next progress save, before the next batch); status `upgrading` and " +
  "`upgradingTo` until done. A node that fails or does not come back within KEELSON_NODE_RESTART_TIMEOUT_MS " +
  "(default 10 min) stops the rollout (taskStatus `error`); a new upgrade request resumes, skipping nodes " +
  "already at the target. Nodes run the target's node package when the control plane stores one (POST /v1/nodePackages), else their host's own (KEELSON_NODE_PACKAGE).";

const RESTART_RULES =
  "Restart = drain, stop the node's phases and start them again, keeping its certificates. Masters one at a " +
  "time (the next only once the previous is ok with its API server responding and every master's etcd runs), " +
  "then workers in batches of `batchPercent` percent (query, 1-100, default 10; rounded down, at least 1). " +
  "`restart` does masters then workers. A node not back within KEELSON_NODE_RESTART_TIMEOUT_MS (default 10 min) " +
  "fails the operation (taskStatus `error`, taskError naming the node and phase) and no further node is touched. " +
  "409 (`cluster_busy`) while a restart, upgrade, attach or detach runs on the cluster. taskStatus `restarting` " +
  "while it runs.";

const RestartQuery = Type.Object({
  batchPercent: Type.Optional(
    Type.Number({ minimum: 1, maximum: 100, description: "Percent of the workers restarted together (default 10)" }),
  ),
});

const RESTART_SCOPE: Record<"restart" | "restartWorkers" | "restartMasters", RestartScope> = {
  restart: "all",
  restartWorkers: "workers",
  restartMasters: "masters",
};

/**
 * Attach and detach (domain/clusters/membership/attach.ts, detach.ts: rules, then an operation that runs
 * the node phases); upgrade and the staggered restarts (domain/clusters/rollouts/rollout-requests.ts,
 * rollout.ts: rules, then a rolling operation).
 */
export const clusterActionRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;

  for (const version of ["v4", "v3"] as const) {
    const tags = [`clusters ${version}`];
    for (const action of ["attach", "detach"] as const) {
      app.post(
        `/${version}/:project_uuid/clusters/:uuid/${action}`,
        {
          config: MEMBER,
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
          await changeMembership(k, action, projectId, clusterId, entries);
          return sendNoBody(reply);
        },
      );
    }

    app.post(
      `/${version}/:project_uuid/clusters/:uuid/upgrade`,
      {
        config: MEMBER,
        schema: {
          tags,
          summary: `Upgrade a cluster (${version})`,
          description: UPGRADE_RULES,
          params: ProjectClusterParams,
          ...(version === "v4" ? { querystring: UpgradeQueryV4 } : {}),
          body: Type.Optional(version === "v4" ? UpgradeBodyV4 : UpgradeBodyV3),
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request, reply) => {
        const query = (request.query ?? {}) as { type?: "patch" | "minor"; force?: boolean };
        const body = request.body ?? {};
        await startUpgrade(k, request.params.project_uuid, request.params.uuid, version, {
          ...(version === "v4" ? { type: query.type, force: query.force } : {}),
          ...body,
        });
        return sendNoBody(reply);
      },
    );
  }

  for (const action of ["restart", "restartWorkers", "restartMasters"] as const) {
    app.post(
      `/v3/:project_uuid/clusters/:uuid/${action}`,
      {
        config: MEMBER,
        schema: {
          tags: ["clusters v3"],
          summary: `Staggered ${action === "restart" ? "restart of every node" : action === "restartWorkers" ? "restart of the workers" : "restart of the masters"}`,
          description: RESTART_RULES,
          params: ProjectClusterParams,
          querystring: RestartQuery,
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request, reply) => {
        const { project_uuid: projectId, uuid: clusterId } = request.params;
        await startRestart(k, projectId, clusterId, RESTART_SCOPE[action], request.query.batchPercent);
        return sendNoBody(reply);
      },
    );
  }

  app.get(
    "/v3/:project_uuid/currentRollingRestarts",
    {
      config: READER,
      schema: {
        tags: ["clusters v3"],
        summary: "Nodes of the rolling restarts in progress",
        description:
          "One entry per node of every unfinished restart of the project; runState true while that node is up (ok).",
        params: ProjectUuidParams,
        response: {
          200: Type.Array(Type.Object({ name: Type.String(), runState: Type.Boolean() })),
          403: ErrorBody,
        },
      },
    },
    async (request) => currentRollingRestarts(k.db, request.params.project_uuid),
  );
};
