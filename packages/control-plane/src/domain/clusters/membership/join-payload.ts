import { type Db, nodes } from "@keelson/db";
import { type CommandPayload, etcdMemberFor, type NodePackageRef, type NodeRole } from "@keelson/protocol";
import { and, asc, eq, ne } from "drizzle-orm";
import { clusterApiServerUrl } from "../../kubeconfig/endpoint.ts";
import type { ClusterRow } from "../views.ts";

/** The stored node package of a role version, if any (domain/packages/node-shelf.ts). */
export type NodePackageLookup = (roleVersion: string) => Promise<NodePackageRef | undefined>;

/**
 * The `node.join` a node gets: the cluster's settings, its CA, where the API is, (for a master)
 * the etcd members it joins, and the node package of the cluster's role version when the
 * control plane stores one. Built right before sending, so a master joining after another one
 * lists that one as soon as it is ok.
 */
export async function buildJoinPayload(
  db: Db,
  cluster: ClusterRow,
  node: { id: string; role: NodeRole },
  packages: NodePackageLookup,
): Promise<CommandPayload<"node.join">> {
  const nodePackage = await packages(cluster.kubeRoleVersion);
  return {
    clusterId: cluster.id,
    clusterName: cluster.name,
    role: node.role,
    kubeRoleVersion: cluster.kubeRoleVersion,
    settings: { ...cluster.spec },
    masterVipVrouterId: cluster.masterVipVrouterId,
    caCertPem: cluster.caCertPem,
    // A master is attached (its row says so) before its join is built, so a cluster without a
    // VIP or DNS name always has a first master's address here.
    apiEndpoint: (await clusterApiServerUrl(db, cluster, node.id)) ?? "",
    etcdMembers: node.role === "master" ? await runningEtcdMembers(db, cluster.id, node.id) : [],
    ...(nodePackage ? { nodePackage } : {}),
  };
}

/** The cluster's masters that joined (status ok), other than `exceptId`, oldest first. */
export async function runningEtcdMembers(db: Db, clusterId: string, exceptId: string) {
  return (
    await db
      .select({ id: nodes.id, primaryIp: nodes.primaryIp })
      .from(nodes)
      .where(and(eq(nodes.clusterId, clusterId), eq(nodes.isMaster, 1), eq(nodes.status, "ok"), ne(nodes.id, exceptId)))
      .orderBy(asc(nodes.createdAt), asc(nodes.id))
  )
    .filter((m) => m.primaryIp !== "")
    .map((m) => etcdMemberFor(m.id, m.primaryIp));
}
