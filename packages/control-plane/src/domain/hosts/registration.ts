import { randomUUID } from "node:crypto";
import { cloudProviders, type Db, firstRow, nodePools, nodes } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import { ApiError } from "../../http/errors.ts";
import { consumeJoinToken, joinTokenUse } from "../identity/join-tokens.ts";
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
}

export interface Registration {
  hostId: string;
  /** The host credential; returned once, stored only as a hash. */
  credential: string;
  projectId: string;
}

/**
 * Registers a host with a one-time join token: the token is spent and the node created in one
 * transaction, so a failed registration does not burn the token and two agents racing with
 * one token cannot both get in. The node joins the project's local node pool, unattached.
 */
export async function registerHost(db: Db, input: RegistrationInput, now = new Date()): Promise<Registration> {
  const hostId = randomUUID();
  const credential = input.credential ?? generateSecret("khc");
  return db.transaction(async (tx) => {
    const repeated = input.credential ? await repeatedRegistration(tx, input.joinToken, input.credential) : undefined;
    if (repeated) return repeated;
    const projectId = await consumeJoinToken(tx, input.joinToken, hostId, now);
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
    await tx.insert(nodes).values({
      id: hostId,
      projectId,
      nodePoolId: pool.id,
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

/**
 * The same registration asked again (its answer was lost): the token was spent by a host whose
 * credential is the one presented. Only the agent that made the credential can know it, so this
 * hands nothing to anyone else; any other use of a spent token stays refused.
 */
async function repeatedRegistration(
  tx: Parameters<typeof consumeJoinToken>[0],
  joinToken: string,
  credential: string,
): Promise<Registration | undefined> {
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
