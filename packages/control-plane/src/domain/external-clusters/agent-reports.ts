import { type Db, type ExternalClusterReport, externalClusters, joinTokens, nodes } from "@keelson/db";
import type { ClusterReportFrame } from "@keelson/protocol";
import { and, eq, inArray, isNotNull } from "drizzle-orm";
import type { ExternalClusterRow } from "./external-clusters.ts";

/**
 * The reports of external clusters' in-cluster agents (protocol's cluster.report): the agent is
 * the host that registered with a join token minted for the cluster (cluster-agent.ts), and its
 * last report is kept on the registration. A report is shown as stale once that agent's link is
 * down: what it read may no longer be so, and nobody is reading.
 */

export type ClusterReportOutcome = { stored: true } | { stored: false; why: string };

/** Stores the report on the external cluster whose agent `hostId` is. */
export async function applyClusterReport(
  db: Db,
  hostId: string,
  frame: ClusterReportFrame,
): Promise<ClusterReportOutcome> {
  const { type: _type, ...report } = frame;
  const [token] = await db
    .select({ clusterId: joinTokens.externalClusterId })
    .from(joinTokens)
    .where(and(eq(joinTokens.usedByNodeId, hostId), isNotNull(joinTokens.externalClusterId)));
  if (!token?.clusterId) return { stored: false, why: "the host is not the agent of an external cluster" };
  await db.update(externalClusters).set({ agentReport: report }).where(eq(externalClusters.id, token.clusterId));
  return { stored: true };
}

export interface AgentView {
  /** An agent registered with the cluster's deployment YAML. */
  registered: boolean;
  connected: boolean;
  report: ExternalClusterReport | null;
  /** A report whose agent's link is down. */
  stale: boolean;
}

/** The agent of each listed cluster: whether one registered, whether it is linked now, its last report. */
export async function agentViews(db: Db, rows: readonly ExternalClusterRow[]): Promise<Map<string, AgentView>> {
  const ids = rows.map((r) => r.id);
  const agents =
    ids.length === 0
      ? []
      : await db
          .select({ clusterId: joinTokens.externalClusterId, connected: nodes.agentConnected })
          .from(joinTokens)
          .innerJoin(nodes, eq(nodes.id, joinTokens.usedByNodeId))
          .where(inArray(joinTokens.externalClusterId, ids));
  const views = new Map<string, AgentView>();
  for (const row of rows) {
    const linked = agents.filter((a) => a.clusterId === row.id);
    const connected = linked.some((a) => a.connected === 1);
    views.set(row.id, {
      registered: linked.length > 0,
      connected,
      report: row.agentReport ?? null,
      stale: row.agentReport !== null && !connected,
    });
  }
  return views;
}
