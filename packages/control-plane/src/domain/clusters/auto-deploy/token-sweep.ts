import { clusters, joinTokens } from "@keelson/db";
import { and, eq, isNotNull, ne } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Keelson } from "../../../context.ts";
import { claimedRenewal, tokenSweepPeriodMs } from "./token-claim.ts";

/**
 * The periodic renewal of auto-deployed clusters' instance join tokens (aws-token.ts says
 * when one is renewed), every tokenSweepPeriodMs. The clusters are those holding an instance
 * token and not being deleted. Every replica sweeps, and each look at a cluster goes through its
 * claim (token-claim.ts): of replicas on one database one reads the cluster's launch templates
 * and renews its token per period, so the others make no AWS call and no second template version.
 *
 * One sweep: each cluster with an instance token that this replica claims is looked at, and
 * renewed when due. `now` is the renewal decision's clock (tests move it); the claims use the
 * database's. Answers the ids of the clusters renewed.
 */
export async function sweepInstanceTokens(k: Keelson, log: FastifyBaseLogger, now?: Date): Promise<string[]> {
  const rows = await k.db
    .selectDistinct({ id: joinTokens.clusterId })
    .from(joinTokens)
    .innerJoin(clusters, eq(clusters.id, joinTokens.clusterId))
    .where(and(isNotNull(joinTokens.clusterId), ne(clusters.status, "deleting")));
  if (rows.length === 0) return [];
  const renewed: string[] = [];
  for (const { id } of rows) {
    const clusterId = id as string;
    try {
      if (await claimedRenewal(k, clusterId, now)) {
        renewed.push(clusterId);
        log.info({ clusterId }, "renewed the cluster's instance join token");
      }
    } catch (err) {
      log.warn({ clusterId, err: (err as Error).message }, "renewing the cluster's instance join token failed");
    }
  }
  return renewed;
}

export function startTokenSweep(k: Keelson, log: FastifyBaseLogger): () => void {
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      await sweepInstanceTokens(k, log);
    } catch (err) {
      log.warn({ err: (err as Error).message }, "the instance join token sweep failed");
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), tokenSweepPeriodMs(k)).unref();
  return () => clearInterval(timer);
}
