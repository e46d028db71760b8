import { type Db, firstRow, operations } from "@keelson/db";
import { and, eq } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";
import { defaultUserData, replaceUserData } from "../../cloud-providers/aws/deploy/template-versions.ts";
import { clusterTokenExpiry, createJoinToken } from "../../identity/join-tokens.ts";
import { agentInstallCommand } from "../../install/agent-install.ts";
import { CLUSTER_OPS } from "../operations.ts";
import type { ClusterRow } from "../views.ts";
import { clusterRow, targetOf } from "./aws-context.ts";
import { instanceUserData } from "./user-data.ts";

/**
 * The join token in an auto-deployed cluster's launch templates, and its renewal. The token is
 * reusable by every instance and lasts KEELSON_AWS_JOIN_TOKEN_MINUTES (a week at most); an
 * instance the group launches after it expired could not register. So a sweep (and each resize,
 * before the group launches anything) looks at the token the templates' default version
 * carries, and when it expires within KEELSON_AWS_JOIN_TOKEN_RENEW_MINUTES mints a new one and
 * makes a new template version with it the default. The decision is read from the templates
 * themselves, so a renewal cut off between the mint and the new versions is simply made again
 * (the orphan token expires unused, and goes with the cluster). The old token stays valid until
 * it expires: an instance booting with it still registers.
 */
export interface AwsCreateParams {
  /** The control plane's URL as the request reached it (or KEELSON_PUBLIC_URL): where agents register. */
  controlPlane: string;
}

/** The boot script of the cluster's instances, installing the agent with `token`. */
export function hostUserData(k: Keelson, controlPlane: string, token: string, cluster: ClusterRow): string {
  const install = agentInstallCommand(controlPlane, k.tls?.caCertHash ?? null, token);
  if (!install) throw new Error(`hosts cannot be told to trust ${controlPlane}: it is plain HTTP and not loopback`);
  return instanceUserData(install, {
    controlPlane,
    ...(cluster.spec.httpProxy ? { httpProxy: cluster.spec.httpProxy } : {}),
  });
}

/** Mints a cluster's instance token, for KEELSON_AWS_JOIN_TOKEN_MINUTES. */
export async function mintInstanceToken(k: Keelson, db: Db, cluster: { id: string; projectId: string }, now?: Date) {
  return await createJoinToken(
    db,
    cluster.projectId,
    { clusterId: cluster.id, expiresInMinutes: k.settings.awsJoinTokenMinutes },
    now,
  );
}

async function createParams(db: Db, clusterId: string): Promise<AwsCreateParams | undefined> {
  const op = firstRow(
    await db
      .select({ params: operations.params })
      .from(operations)
      .where(and(eq(operations.targetId, clusterId), eq(operations.kind, CLUSTER_OPS.awsCreate))),
  );
  return op?.params as AwsCreateParams | undefined;
}

const TOKEN = /kjt_[A-Za-z0-9_-]+/;

/**
 * Renews the cluster's instance token when the one its templates carry expires within the
 * margin (or is gone); answers whether it did. Nothing before the create made the templates.
 */
export async function renewInstanceToken(k: Keelson, db: Db, clusterId: string, now = new Date()): Promise<boolean> {
  const cluster = await clusterRow(db, clusterId);
  const target = await targetOf(k, cluster);
  const current = await defaultUserData(target);
  if (current.size === 0) return false;
  const margin = k.settings.awsJoinTokenRenewMinutes * 60_000;
  const expiries = await Promise.all(
    [...current.values()].map(async (data) => {
      const token = TOKEN.exec(data)?.[0];
      return token ? await clusterTokenExpiry(db, token) : undefined;
    }),
  );
  if (expiries.every((at) => at !== undefined && Date.parse(at) - now.getTime() > margin)) return false;
  const params = await createParams(db, clusterId);
  if (!params) return false;
  const issued = await mintInstanceToken(k, db, cluster, now);
  await replaceUserData(target, current.keys(), hostUserData(k, params.controlPlane, issued.token, cluster));
  return true;
}
