/**
 * Role health of spec §2.1. A node counts as healthy when its node status is `ok`, its agent is
 * connected and, for masters, its API server responds.
 *
 * A role with no nodes reads as the empty string: there is nothing to be healthy or not, and
 * "healthy" would hide that a cluster has no workers at all.
 */
export type RoleHealth = "healthy" | "partially healthy" | "unhealthy" | "";

export interface NodeHealthInput {
  isMaster: number;
  status: string;
  agentConnected: number;
  apiResponding: number;
}

export function isHealthyNode(node: NodeHealthInput): boolean {
  return node.status === "ok" && node.agentConnected === 1 && (node.isMaster === 0 || node.apiResponding === 1);
}

/** Masters: all healthy, or a quorum (more than half) healthy, or not even a quorum. */
export function masterHealth(total: number, healthy: number): RoleHealth {
  if (total === 0) return "";
  if (healthy === total) return "healthy";
  return healthy > total / 2 ? "partially healthy" : "unhealthy";
}

/** Workers: all healthy, more than 50% healthy, otherwise unhealthy (an exact half counts as unhealthy). */
export function workerHealth(total: number, healthy: number): RoleHealth {
  if (total === 0) return "";
  if (healthy === total) return "healthy";
  return healthy > total / 2 ? "partially healthy" : "unhealthy";
}

export interface RoleCounts {
  masters: number;
  healthyMasters: number;
  workers: number;
  healthyWorkers: number;
}

export function countRoles(nodes: Iterable<NodeHealthInput>): RoleCounts {
  const counts: RoleCounts = { masters: 0, healthyMasters: 0, workers: 0, healthyWorkers: 0 };
  for (const node of nodes) {
    const healthy = isHealthyNode(node);
    if (node.isMaster === 1) {
      counts.masters++;
      if (healthy) counts.healthyMasters++;
    } else {
      counts.workers++;
      if (healthy) counts.healthyWorkers++;
    }
  }
  return counts;
}

/**
 * Status of a cluster with no task running: `pending` until a master is attached, then `ok`
 * while the masters keep a quorum, `error` when they lose it.
 */
export function settledClusterStatus(counts: RoleCounts): "pending" | "ok" | "error" {
  if (counts.masters === 0) return "pending";
  return masterHealth(counts.masters, counts.healthyMasters) === "unhealthy" ? "error" : "ok";
}
