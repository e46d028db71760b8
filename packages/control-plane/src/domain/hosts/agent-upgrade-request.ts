import { nodes } from "@keelson/db";
import { and, eq, inArray } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import { activeOperationFor, recordOperation } from "../../runner/store.ts";
import { BUSY_KINDS } from "../clusters/rollouts/rollout.ts";
import { agentShelf } from "../packages/agent-shelf.ts";
import type { ShelfPlace } from "../packages/shelf.ts";
import { HOST_UPGRADE_KIND, type HostUpgradeParams } from "./agent-rollout.ts";

export interface HostAgentUpgradeRequest {
  version: string;
  hosts: string[];
  batchSize?: number;
}

interface HostPlacement {
  id: string;
  clusterId: string | null;
  isMaster: boolean;
}

/**
 * Splits hosts into batches of at most `size`, in the order given, such that no batch holds
 * two masters of one cluster: a master goes into the first batch with room and no master of
 * its cluster yet. So a cluster loses at most one master at a time, whatever the batch size.
 */
export function planBatches(hosts: HostPlacement[], size: number): string[][] {
  const batches: { ids: string[]; masterClusters: Set<string> }[] = [];
  for (const host of hosts) {
    const cluster = host.isMaster ? host.clusterId : null;
    let batch = batches.find((b) => b.ids.length < size && !(cluster && b.masterClusters.has(cluster)));
    if (!batch) {
      batch = { ids: [], masterClusters: new Set() };
      batches.push(batch);
    }
    batch.ids.push(host.id);
    if (cluster) batch.masterClusters.add(cluster);
  }
  return batches.map((b) => b.ids);
}

type Checker = Pick<Keelson, "db" | "agents">;

/**
 * The checks every host-agent upgrade request passes and its batches: every host of the
 * project (404) and connected now (409: an offline host cannot be upgraded and would only stall
 * the rollout), none named twice (400). Nothing is recorded.
 */
async function checkedBatches(
  k: Checker,
  projectId: string,
  request: HostAgentUpgradeRequest,
): Promise<{ batches: string[][]; clusterIds: string[] }> {
  const unique = [...new Set(request.hosts)];
  if (unique.length !== request.hosts.length) throw badRequest("hosts", "hosts must not name a host twice");
  const rows = await k.db
    .select({ id: nodes.id, clusterId: nodes.clusterId, isMaster: nodes.isMaster })
    .from(nodes)
    .where(and(eq(nodes.projectId, projectId), inArray(nodes.id, unique)));
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const id of unique) if (!byId.has(id)) throw notFound("host", id);
  const offline = unique.filter((id) => !k.agents.isConnected(id));
  if (offline.length > 0) {
    throw conflict(`hosts ${offline.join(", ")} are offline: their agents are not connected`, "host_offline");
  }
  const batches = planBatches(
    unique.map((id) => {
      const row = byId.get(id) as (typeof rows)[number];
      return { id, clusterId: row.clusterId, isMaster: row.isMaster === 1 };
    }),
    request.batchSize ?? 1,
  );
  return { batches, clusterIds: [...new Set(rows.flatMap((r) => (r.clusterId ? [r.clusterId] : [])))] };
}

/** 409 when the project's agents are being upgraded already, or a cluster of these hosts is busy. */
async function refuseWhileBusy(
  tx: Parameters<typeof activeOperationFor>[0],
  projectId: string,
  clusterIds: string[],
): Promise<void> {
  const running = await activeOperationFor(tx, projectId, [HOST_UPGRADE_KIND]);
  if (running) {
    throw conflict(`a host-agent upgrade (operation ${running.id}) is already in progress`, "upgrade_in_progress");
  }
  // An agent restarting onto a new version in the middle of its node's restart or upgrade
  // would cut that node's command short: a cluster busy with a rollout keeps its agents.
  for (const clusterId of clusterIds) {
    const busy = await activeOperationFor(tx, clusterId, BUSY_KINDS);
    if (busy) {
      throw conflict(
        `cluster ${clusterId} of some of these hosts is busy with ${busy.kind} (operation ${busy.id}); ` +
          "upgrade their agents once it finished",
        "cluster_busy",
      );
    }
  }
}

/**
 * `POST /v4/{project_uuid}/hostAgentUpgrades/plan`: the batches the request would run in, after
 * the same checks as the request itself (so a plan shown is one that can start now), recording
 * nothing. The console shows it before the operator confirms.
 */
export async function planHostAgentUpgrade(
  k: Checker,
  projectId: string,
  request: HostAgentUpgradeRequest,
): Promise<{ batches: string[][] }> {
  const { batches, clusterIds } = await checkedBatches(k, projectId, request);
  await refuseWhileBusy(k.db, projectId, clusterIds);
  return { batches };
}

/**
 * `POST /v4/{project_uuid}/hostAgentUpgrades`: checks the request and records a
 * `hosts.upgrade` operation. The version must be stored on this control plane (agents download
 * it from here). One host-agent rollout per project at a time.
 */
export async function requestHostAgentUpgrade(
  k: Pick<Keelson, "db" | "store" | "dataDir" | "agents" | "runner">,
  projectId: string,
  request: HostAgentUpgradeRequest,
  baseUrl: string,
  pkg: { sha256: string },
): Promise<{ operationId: string; batches: string[][] }> {
  const { batches, clusterIds } = await checkedBatches(k, projectId, request);
  const params: HostUpgradeParams = {
    version: request.version,
    sha256: pkg.sha256,
    url: `${baseUrl.replace(/\/+$/, "")}${agentShelf(k).downloadPath(request.version)}`,
    batches,
  };
  const op = await k.db.transaction(async (tx) => {
    await refuseWhileBusy(tx, projectId, clusterIds);
    return recordOperation(tx, {
      projectId,
      kind: HOST_UPGRADE_KIND,
      targetType: "host-agents",
      targetId: projectId,
      params,
    });
  });
  k.runner.enqueue(op);
  return { operationId: op.id, batches };
}

/** The stored package of `version`, or a 400 naming `version`. */
export async function requirePackage(place: ShelfPlace, version: string): Promise<{ sha256: string }> {
  const pkg = await agentShelf(place).find(version);
  if (!pkg) {
    throw badRequest(
      "version",
      `agent package ${version} is not stored on this control plane: upload it first (POST /v1/agentPackages)`,
    );
  }
  return pkg;
}
