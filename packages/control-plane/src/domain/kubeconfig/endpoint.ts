import { type Db, firstRow, nodes } from "@keelson/db";
import { urlHost } from "@keelson/protocol";
import { and, asc, eq, ne, sql } from "drizzle-orm";
import type { ClusterRow } from "../clusters/views.ts";
import { apiPort, externalDnsName, masterVipIpv4 } from "./cluster-settings.ts";

/**
 * The primary IP of a master of the cluster, the fallback API endpoint: one that is ok (its API
 * server runs) before one still joining, then `joiningId` (a first master's join names itself,
 * not a master of the same request that has not joined yet), then the oldest.
 */
export async function firstMasterIp(db: Db, clusterId: string, joiningId?: string): Promise<string | undefined> {
  const row = firstRow(
    await db
      .select({ primaryIp: nodes.primaryIp })
      .from(nodes)
      .where(and(eq(nodes.clusterId, clusterId), eq(nodes.isMaster, 1), ne(nodes.primaryIp, "")))
      .orderBy(
        sql`case when ${nodes.status} = 'ok' then 0 else 1 end`,
        sql`case when ${nodes.id} = ${joiningId ?? ""} then 0 else 1 end`,
        asc(nodes.createdAt),
        asc(nodes.id),
      )
      .limit(1),
  );
  return row?.primaryIp;
}

/**
 * Where kubectl reaches the cluster's API: the external DNS name when the operator set one
 * (it survives master replacement), else the master VIP, else the first master's own address.
 * Undefined when there is none of the three yet.
 */
export function apiServerUrl(spec: Record<string, unknown>, masterIp: string | undefined): string | undefined {
  const host = externalDnsName(spec) ?? masterVipIpv4(spec) ?? masterIp;
  if (host === undefined) return undefined;
  const hostPart = urlHost(host);
  return `https://${hostPart}:${apiPort(spec)}`;
}

export async function clusterApiServerUrl(
  db: Db,
  cluster: ClusterRow,
  joiningId?: string,
): Promise<string | undefined> {
  const spec = cluster.spec;
  // Only ask the nodes table when the spec names no endpoint.
  if (externalDnsName(spec) ?? masterVipIpv4(spec)) return apiServerUrl(spec, undefined);
  return apiServerUrl(spec, await firstMasterIp(db, cluster.id, joiningId));
}
