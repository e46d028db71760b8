import { nodes } from "@keelson/db";
import type { NodeRecordV3, NodeRecordV4 } from "@keelson/protocol";
import { LAST_SEEN } from "../hosts/last-seen.ts";

/**
 * The node columns the records show, and the list order's: not the phases and facts, several
 * KB a node that a list of 1,000 nodes would read and parse only to drop (nodes.ts selects these,
 * joined with host_presence for `lastSeen`).
 */
export const NODE_RECORD_COLUMNS = {
  id: nodes.id,
  name: nodes.name,
  primaryIp: nodes.primaryIp,
  status: nodes.status,
  isMaster: nodes.isMaster,
  apiResponding: nodes.apiResponding,
  projectId: nodes.projectId,
  agentConnected: nodes.agentConnected,
  lastSeen: LAST_SEEN,
  actualKubeRoleVersion: nodes.actualKubeRoleVersion,
  cloudInstanceId: nodes.cloudInstanceId,
  nodePoolId: nodes.nodePoolId,
  clusterId: nodes.clusterId,
  createdAt: nodes.createdAt,
};

export type NodeRow = Pick<typeof nodes.$inferSelect, keyof typeof NODE_RECORD_COLUMNS>;

/** What a node record needs besides its row: its pool, provider and cluster. */
export interface NodeExtras {
  nodePool: { uuid: string; name: string };
  cloudProvider: { uuid: string; type: string };
  cluster: { uuid: string; name: string; kubeRoleVersion: string; masterless: boolean } | null;
}

/**
 * Node rows -> the v4 and v3 node records of spec §2.2, plus Keelson's `agentConnected` and
 * `lastSeen` on both. An unattached node reads `clusterUuid`, `clusterName` and
 * `clusterKubeRoleVersion` as null: there is no cluster to name.
 */
export function presentNodeV4(row: NodeRow, extras: NodeExtras): NodeRecordV4 {
  return {
    uuid: row.id,
    name: row.name,
    primaryIp: row.primaryIp,
    status: row.status,
    isMaster: row.isMaster ? 1 : 0,
    // Only a master runs an API server (§2.2); a worker always reads 0.
    api_responding: row.isMaster && row.apiResponding ? 1 : 0,
    clusterName: extras.cluster?.name ?? null,
    clusterUuid: extras.cluster?.uuid ?? null,
    cloudProviderType: extras.cloudProvider.type,
    nodePoolName: extras.nodePool.name,
    nodePoolUuid: extras.nodePool.uuid,
    projectId: row.projectId,
    agentConnected: row.agentConnected === 1,
    lastSeen: row.lastSeen ?? null,
  };
}

export function presentNodeV3(row: NodeRow, extras: NodeExtras): NodeRecordV3 {
  return {
    ...presentNodeV4(row, extras),
    actualKubeRoleVersion: row.actualKubeRoleVersion,
    // As the instance's agent registered it; hosts of the local provider are not cloud instances.
    cloudInstanceId: row.cloudInstanceId ?? "",
    cloudProviderUuid: extras.cloudProvider.uuid,
    clusterKubeRoleVersion: extras.cluster?.kubeRoleVersion ?? null,
    // Kubernetes runs on a node once it is attached; stopping it per node comes with the phases.
    startKube: extras.cluster ? 1 : 0,
    masterless: extras.cluster?.masterless ? 1 : 0,
  };
}
