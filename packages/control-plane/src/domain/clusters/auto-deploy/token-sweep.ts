import { clusters, type Db, databaseTime, dialectOf, instanceTokenChecks, joinTokens } from "@keelson/db";
import { and, eq, isNotNull, lt, ne } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Keelson } from "../../../context.ts";

/**
 * The periodic renewal of auto-deployed clusters' instance join tokens (aws-token.ts says
 * when one is renewed). It runs a quarter of the renewal margin apart (at most every 15
 * minutes), so a token is looked at several times before it expires. The clusters are those
 * holding an instance token and not being deleted; aws-token.ts (and with it the AWS SDK) loads
 * only when there is one.
 *
 * Every replica sweeps, and each look at a cluster is claimed first in `instance_token_checks`
 * (one conditional upsert, by the database's clock): of replicas on one database one reads the
 * cluster's launch templates and renews its token per period, so the others make no AWS call
 * and no second template version. A claim holds nine tenths of a period: the replica that looked
 * looks again at its next sweep, and when it is gone another takes over within a period.
 */
export function tokenSweepPeriodMs(k: Keelson): number {
  return Math.min((k.settings.awsJoinTokenRenewMinutes * 60_000) / 4, 15 * 60_000);
}

/**
 * Claims this look at `clusterId`'s token for `replicaId`: written only when no replica looked
 * within `holdMs`, so of replicas claiming at once one gets it (the primary key and the upsert's
 * condition, checked by the database on the row).
 */
export async function claimTokenCheck(db: Db, clusterId: string, replicaId: string, holdMs: number): Promise<boolean> {
  const dialect = dialectOf(db);
  const look = { checkedAt: databaseTime(dialect), checkedBy: replicaId };
  const rows = await db
    .insert(instanceTokenChecks)
    .values({ clusterId, ...look })
    .onConflictDoUpdate({
      target: instanceTokenChecks.clusterId,
      set: look,
      setWhere: lt(instanceTokenChecks.checkedAt, databaseTime(dialect, -holdMs)),
    })
    .returning({ clusterId: instanceTokenChecks.clusterId });
  return rows.length > 0;
}

/**
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
  const { renewInstanceToken } = await import("./aws-token.ts");
  const holdMs = (tokenSweepPeriodMs(k) * 9) / 10;
  const renewed: string[] = [];
  for (const { id } of rows) {
    const clusterId = id as string;
    try {
      if (!(await claimTokenCheck(k.db, clusterId, k.settings.replicaId, holdMs))) continue;
      if (await renewInstanceToken(k, k.db, clusterId, now)) {
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
