import { randomUUID } from "node:crypto";
import { cloudProviders, clusters, type Db, firstRow, nodePools, nodes, type Tx } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { ApiError, badRequest } from "../../http/errors.ts";
import { joinTokenUse, useJoinToken } from "../identity/join-tokens.ts";
import { generateSecret, hashSecret } from "../identity/token-hash.ts";

export interface RegistrationInput {
  joinToken: string;
  hostname: string;
  primaryIp?: string;
  agentVersion?: string;
  /**
   * A credential the agent made and keeps: the registration becomes repeatable. If the answer
   * is lost, the agent asks again with the same token and credential and gets the same host,
   * instead of a spent token. Without it, the control plane makes one (older agents).
   */
  credential?: string;
  /**
   * The cloud's id of this machine (EC2's instance-id, which the auto deploy's user data reads
   * from the instance metadata service). Required with a cluster's token: it is how the
   * cluster's operation knows its instances' hosts, and a second registration of one instance
   * is the same host again (with its credential) or refused.
   */
  cloudInstanceId?: string;
}

export interface Registration {
  hostId: string;
  /** The host credential; returned once, stored only as a hash. */
  credential: string;
  projectId: string;
}

/**
 * Registers a host with a join token: a one-time token is spent and the node created in one
 * transaction, so a failed registration does not burn the token and two agents racing with
 * one token cannot both get in; the node joins the project's local node pool, unattached. A
 * cluster's token (an auto deploy's instances) is not spent: the node joins that cluster's node
 * pool, unattached, and the cluster's operation attaches it.
 */
export async function registerHost(db: Db, input: RegistrationInput, now = new Date()): Promise<Registration> {
  const hostId = randomUUID();
  const credential = input.credential ?? generateSecret("khc");
  return db.transaction(async (tx) => {
    const repeated = input.credential ? await repeatedRegistration(tx, input.joinToken, input.credential) : undefined;
    if (repeated) return repeated;
    const grant = await useJoinToken(tx, input.joinToken, hostId, now);
    const { projectId } = grant;
    if (grant.clusterId) {
      const again = await sameInstance(tx, input, credential);
      if (again) return again;
    }
    const poolId = grant.clusterId ? await clusterPool(tx, grant.clusterId) : await localPool(tx, projectId);
    await tx.insert(nodes).values({
      id: hostId,
      projectId,
      nodePoolId: poolId,
      cloudInstanceId: input.cloudInstanceId ?? null,
      clusterId: null,
      name: input.hostname,
      primaryIp: input.primaryIp ?? "",
      status: "ok",
      credentialHash: hashSecret(credential),
      agentVersion: input.agentVersion ?? "",
      agentConnected: 0,
      createdAt: now.toISOString(),
    });
    return { hostId, credential, projectId };
  });
}

async function localPool(tx: Tx, projectId: string): Promise<string> {
  const pool = firstRow(
    await tx
      .select({ id: nodePools.id })
      .from(nodePools)
      .innerJoin(cloudProviders, eq(nodePools.cloudProviderId, cloudProviders.id))
      .where(and(eq(nodePools.projectId, projectId), eq(cloudProviders.type, "local"))),
  );
  if (!pool) {
    // Every project is created with one; reaching this means someone deleted it by hand.
    throw new ApiError(409, "no_local_node_pool", `project ${projectId} has no local node pool to register hosts in`);
  }
  return pool.id;
}

async function clusterPool(tx: Tx, clusterId: string): Promise<string> {
  // The token's foreign key keeps the cluster while the token exists.
  const row = firstRow(await tx.select({ id: clusters.nodePoolId }).from(clusters).where(eq(clusters.id, clusterId)));
  if (!row) throw new ApiError(409, "cluster_gone", `cluster ${clusterId} is gone`);
  return row.id;
}

/**
 * A cluster token's registration names its instance; one instance is one host. The same
 * instance with the same credential is that host again (a lost answer); with another it is
 * refused, so a leaked token cannot take over an instance's node.
 */
async function sameInstance(tx: Tx, input: RegistrationInput, credential: string): Promise<Registration | undefined> {
  if (!input.cloudInstanceId) {
    throw badRequest(
      "cloudInstanceId",
      "a cluster's join token registers cloud instances only: cloudInstanceId is required",
    );
  }
  const node = firstRow(
    await tx
      .select({ id: nodes.id, projectId: nodes.projectId, credentialHash: nodes.credentialHash })
      .from(nodes)
      .where(eq(nodes.cloudInstanceId, input.cloudInstanceId)),
  );
  if (!node) return undefined;
  if (node.credentialHash !== hashSecret(credential)) {
    throw new ApiError(
      409,
      "instance_registered",
      `instance ${input.cloudInstanceId} is registered already`,
      "cloudInstanceId",
    );
  }
  return { hostId: node.id, credential, projectId: node.projectId };
}

/**
 * The same registration asked again (its answer was lost): the token was spent by a host whose
 * credential is the one presented. Only the agent that made the credential can know it, so this
 * hands nothing to anyone else; any other use of a spent token stays refused.
 */
async function repeatedRegistration(tx: Tx, joinToken: string, credential: string): Promise<Registration | undefined> {
  const use = await joinTokenUse(tx, joinToken);
  if (!use?.nodeId) return undefined;
  const node = firstRow(
    await tx
      .select({ id: nodes.id, projectId: nodes.projectId, credentialHash: nodes.credentialHash })
      .from(nodes)
      .where(eq(nodes.id, use.nodeId)),
  );
  if (!node || node.credentialHash !== hashSecret(credential)) return undefined;
  return { hostId: node.id, credential, projectId: node.projectId };
}
