import { nodes } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { badRequest, conflict } from "../../../http/errors.ts";
import type { OperationRow } from "../../../runner/types.ts";
import { hostsInAgentRollout } from "../../hosts/agent-rollout.ts";
import { nodeShelf } from "../../packages/node-shelf.ts";
import { countRoles } from "../health/health.ts";
import { toStringMap } from "../spec/coerce.ts";
import { checkToken } from "../spec/formats.ts";
import { startClusterTask } from "../start-task.ts";
import { findCluster } from "../views.ts";
import {
  assertNotBusy,
  clusterNodes,
  DEFAULT_BATCH_PERCENT,
  type RestartParams,
  ROLLOUT_OPS,
  type UpgradeChanges,
  type UpgradeParams,
} from "./rollout.ts";

/**
 * The requests that start a rolling restart or an upgrade: rules checked first (each a 400
 * naming the field, 409 while the cluster is busy), then in one transaction the cluster's task
 * status and the operation (rollout.ts does the work).
 */

export type RestartScope = RestartParams["scope"];

function checkPercent(value: number | undefined, field: string): number {
  if (value === undefined) return DEFAULT_BATCH_PERCENT;
  if (!Number.isFinite(value) || value < 1 || value > 100) {
    throw badRequest(field, `${field} must be a number from 1 to 100 (got ${value})`, "out_of_range");
  }
  return value;
}

/** `POST /v3/{project}/clusters/{uuid}/restart|restartWorkers|restartMasters[?batchPercent=]`. */
export async function startRestart(
  k: Keelson,
  projectId: string,
  clusterId: string,
  scope: RestartScope,
  batchPercent?: number,
): Promise<OperationRow> {
  const cluster = await findCluster(k.db, projectId, clusterId);
  const percent = checkPercent(batchPercent, "batchPercent");
  await assertNotBusy(k.db, clusterId);
  const all = await clusterNodes(k.db, clusterId);
  const masters = scope === "workers" ? [] : all.masters;
  const workers = scope === "masters" ? [] : all.workers;
  if (masters.length + workers.length === 0) {
    const what = scope === "all" ? "nodes" : scope;
    throw badRequest("uuid", `cluster ${cluster.name} (${cluster.id}) has no ${what} to restart`, "nothing_to_restart");
  }
  const params: RestartParams = { scope, batchPercent: percent, masters, workers };
  return (
    await startClusterTask(k, {
      projectId,
      clusterId,
      kind: ROLLOUT_OPS.restart,
      params,
      mark: { taskStatus: "restarting", lastOp: "restart" },
      first: async (tx) => {
        await assertNotBusy(tx, clusterId);
        await assertNoAgentRollout(tx, projectId, [...masters, ...workers]);
      },
    })
  ).operation;
}

export interface UpgradeRequest {
  /** v4 only; v3 takes the patch target when there is one, else the minor target. */
  type?: "patch" | "minor";
  force?: boolean;
  batchUpgradePercent?: number;
  batchUpgradeNodes?: string[];
  containerRuntime?: "docker" | "containerd";
  addonOperatorImageTag?: string;
  addonVersions?: unknown;
}

/** `POST /v4|v3/{project}/clusters/{uuid}/upgrade`. */
export async function startUpgrade(
  k: Keelson,
  projectId: string,
  clusterId: string,
  version: "v3" | "v4",
  request: UpgradeRequest,
): Promise<OperationRow> {
  const cluster = await findCluster(k.db, projectId, clusterId);
  const percent = checkPercent(request.batchUpgradePercent, "batchUpgradePercent");
  if (version === "v3" && (request.type !== undefined || request.force !== undefined)) {
    throw badRequest(request.type !== undefined ? "type" : "force", "v3 upgrade takes no query parameters", "v4_only");
  }
  if (version === "v3" && request.batchUpgradeNodes !== undefined) {
    throw badRequest("batchUpgradeNodes", "batchUpgradeNodes is a v4 field", "v4_only");
  }
  await assertNotBusy(k.db, clusterId);

  const targets = k.catalogue.upgradeTargets(cluster.kubeRoleVersion);
  const type = version === "v4" ? (request.type ?? "patch") : targets.patch ? "patch" : "minor";
  const target = targets[type];
  if (!target) {
    throw badRequest(
      "type",
      `cluster ${cluster.name} at ${cluster.kubeRoleVersion} has no ${version === "v3" ? "" : `${type} `}upgrade ` +
        `target in the catalogue (canUpgrade is ${targets.patch !== null || targets.minor !== null})`,
      "no_upgrade_target",
    );
  }

  await assertNodePackageFor(k, cluster, target);

  const changes: UpgradeChanges = {};
  if (request.containerRuntime !== undefined) changes.containerRuntime = request.containerRuntime;
  if (request.addonOperatorImageTag !== undefined) {
    if (request.addonOperatorImageTag === "" || request.addonOperatorImageTag.length > 255) {
      throw badRequest("addonOperatorImageTag", "addonOperatorImageTag must be 1 to 255 characters", "invalid_field");
    }
    checkToken(request.addonOperatorImageTag, "addonOperatorImageTag");
    changes.addonOperatorImageTag = request.addonOperatorImageTag;
  }
  if (request.addonVersions !== undefined) {
    changes.addonVersions = toStringMap(request.addonVersions, "addonVersions", 128);
  }

  const all = await clusterNodes(k.db, clusterId);
  const workerIds = new Map(all.workers.map((n) => [n.id, n]));
  const chosenIds = new Set<string>();
  (request.batchUpgradeNodes ?? []).forEach((id, i) => {
    const field = `batchUpgradeNodes[${i}]`;
    if (chosenIds.has(id)) throw badRequest(field, `node ${id} is listed more than once`, "duplicate_node");
    if (!workerIds.has(id)) {
      throw badRequest(field, `node ${id} is not a worker of cluster ${cluster.name} (${cluster.id})`, "not_a_worker");
    }
    chosenIds.add(id);
  });

  if (!request.force) {
    const rows = await k.db
      .select({
        isMaster: nodes.isMaster,
        status: nodes.status,
        agentConnected: nodes.agentConnected,
        apiResponding: nodes.apiResponding,
      })
      .from(nodes)
      .where(and(eq(nodes.clusterId, clusterId)));
    const counts = countRoles(rows);
    const healthy =
      counts.masters > 0 && counts.healthyMasters === counts.masters && counts.healthyWorkers === counts.workers;
    if (!healthy) {
      throw badRequest(
        version === "v4" ? "force" : "uuid",
        `cluster ${cluster.name} is not healthy (${counts.healthyMasters} of ${counts.masters} masters and ` +
          `${counts.healthyWorkers} of ${counts.workers} workers ok)` +
          (version === "v4" ? "; upgrade it anyway with force=true" : ""),
        "cluster_unhealthy",
      );
    }
  }

  const params: UpgradeParams = {
    target,
    batchPercent: percent,
    masters: all.masters,
    chosen: [...chosenIds].map((id) => workerIds.get(id) as (typeof all.workers)[number]),
    workers: all.workers.filter((n) => !chosenIds.has(n.id)),
    changes,
  };
  return (
    await startClusterTask(k, {
      projectId,
      clusterId,
      kind: ROLLOUT_OPS.upgrade,
      params,
      mark: { status: "upgrading", taskStatus: "upgrading", upgradingTo: target, lastOp: "upgrade" },
      first: async (tx) => {
        await assertNotBusy(tx, clusterId);
        await assertNoAgentRollout(tx, projectId, [...all.masters, ...all.workers]);
      },
    })
  ).operation;
}

/**
 * A cluster whose nodes run control-plane-served node packages (one is stored for its current
 * role version) upgrades only to a version that has one too: otherwise its nodes would keep the
 * old binaries under the new version's name. Clusters on host-installed packages (none stored
 * for their version) are not held back.
 */
async function assertNodePackageFor(
  k: Keelson,
  cluster: { name: string; kubeRoleVersion: string },
  target: string,
): Promise<void> {
  const shelf = nodeShelf(k);
  if ((await shelf.find(cluster.kubeRoleVersion)) && !(await shelf.find(target))) {
    throw conflict(
      `cluster ${cluster.name} runs the stored node package of ${cluster.kubeRoleVersion}, but no node package of ` +
        `${target} is stored: upload it first (POST /v1/nodePackages)`,
      "node_package_missing",
    );
  }
}

/** A node whose agent is being upgraded would restart under its node's command: 409 until that rollout ends. */
async function assertNoAgentRollout(
  tx: Parameters<typeof hostsInAgentRollout>[0],
  projectId: string,
  clusterNodes: { id: string; name: string }[],
): Promise<void> {
  const rollout = await hostsInAgentRollout(tx, projectId);
  const caught = rollout ? clusterNodes.filter((n) => rollout.hosts.has(n.id)) : [];
  if (rollout && caught.length > 0) {
    throw conflict(
      `the agents of ${caught.map((n) => n.name).join(", ")} are being upgraded (operation ${rollout.operationId}); ` +
        "try again once it finished",
      "cluster_busy",
    );
  }
}
