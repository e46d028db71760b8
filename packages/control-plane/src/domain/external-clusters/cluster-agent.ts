import { externalClusters, joinTokens, nodes } from "@keelson/db";
import { and, eq, inArray, isNull } from "drizzle-orm";
import type { Keelson } from "../../context.ts";
import { createJoinToken } from "../identity/join-tokens.ts";
import { packageToInstall } from "../install/agent-install.ts";
import { agentShelf } from "../packages/agent-shelf.ts";
import { agentManifest } from "./agent-manifest.ts";
import { findExternalCluster } from "./external-clusters.ts";

/**
 * The agent of an external cluster: the host that registers with a join token minted for the
 * cluster (`join_tokens.external_cluster_id`), which its deployment YAML carries. A new manifest
 * replaces the unspent tokens of earlier ones, so only the manifest handed out last can still
 * register; deregistering the cluster deletes its tokens and the agents that used them (their
 * credentials with them), and ends their links.
 */

/** Long enough to get the manifest applied in a private network; spent at the first registration. */
export const AGENT_TOKEN_MINUTES = 24 * 60;

export async function agentDeploymentYaml(
  keelson: Pick<Keelson, "db" | "store" | "dataDir" | "tls">,
  projectId: string,
  clusterId: string,
  controlPlane: string,
): Promise<string> {
  const cluster = await findExternalCluster(keelson.db, projectId, clusterId);
  // 404 when no agent package is stored: there is no agent to deploy (spec §7).
  const agentPackage = await packageToInstall(agentShelf(keelson), undefined);
  await keelson.db
    .delete(joinTokens)
    .where(and(eq(joinTokens.externalClusterId, cluster.id), isNull(joinTokens.usedAt)));
  const token = await createJoinToken(keelson.db, projectId, {
    expiresInMinutes: AGENT_TOKEN_MINUTES,
    externalClusterId: cluster.id,
  });
  return agentManifest({
    clusterName: cluster.externalId,
    clusterId: cluster.id,
    controlPlane,
    caHash: keelson.tls?.caCertHash ?? null,
    caPem: keelson.tls?.caBundlePem ?? null,
    joinToken: token.token,
    agentPackage,
  });
}

/**
 * Removes the registration, its agent tokens and the hosts that registered with them, in one
 * transaction; returns those hosts so the caller ends their links (a deleted host's credential
 * no longer authenticates, so the agent cannot reconnect).
 */
export async function deregisterExternalCluster(
  keelson: Pick<Keelson, "db" | "agents">,
  projectId: string,
  clusterId: string,
): Promise<string[]> {
  const agents = await keelson.db.transaction(async (tx) => {
    const cluster = await findExternalCluster(tx, projectId, clusterId);
    const tokens = await tx
      .select({ nodeId: joinTokens.usedByNodeId })
      .from(joinTokens)
      .where(eq(joinTokens.externalClusterId, cluster.id));
    const hostIds = tokens.flatMap((t) => (t.nodeId ? [t.nodeId] : []));
    await tx.delete(joinTokens).where(eq(joinTokens.externalClusterId, cluster.id));
    if (hostIds.length > 0) {
      await tx.delete(nodes).where(and(eq(nodes.projectId, projectId), inArray(nodes.id, hostIds)));
    }
    await tx.delete(externalClusters).where(eq(externalClusters.id, cluster.id));
    return hostIds;
  });
  for (const hostId of agents) keelson.agents.revoke(hostId, "the external cluster was deregistered");
  return agents;
}
