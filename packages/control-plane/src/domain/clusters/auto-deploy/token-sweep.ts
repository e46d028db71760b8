import { clusters, joinTokens } from "@keelson/db";
import { and, eq, isNotNull, ne } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Keelson } from "../../../context.ts";

/**
 * The periodic renewal of auto-deployed clusters' instance join tokens (aws-token.ts says
 * when one is renewed). It runs a quarter of the renewal margin apart (at most every 15
 * minutes), so a token is looked at several times before it expires. The clusters are those
 * holding an instance token and not being deleted; aws-token.ts (and with it the AWS SDK) loads
 * only when there is one.
 */
export function startTokenSweep(k: Keelson, log: FastifyBaseLogger): () => void {
  const every = Math.min((k.settings.awsJoinTokenRenewMinutes * 60_000) / 4, 15 * 60_000);
  let running = false;
  const sweep = async () => {
    if (running) return;
    running = true;
    try {
      const rows = await k.db
        .selectDistinct({ id: joinTokens.clusterId })
        .from(joinTokens)
        .innerJoin(clusters, eq(clusters.id, joinTokens.clusterId))
        .where(and(isNotNull(joinTokens.clusterId), ne(clusters.status, "deleting")));
      if (rows.length === 0) return;
      const { renewInstanceToken } = await import("./aws-token.ts");
      for (const { id } of rows) {
        const renewed = await renewInstanceToken(k, k.db, id as string).catch((err: Error) => {
          log.warn({ clusterId: id, err: err.message }, "renewing the cluster's instance join token failed");
          return false;
        });
        if (renewed) log.info({ clusterId: id }, "renewed the cluster's instance join token");
      }
    } catch (err) {
      log.warn({ err: (err as Error).message }, "the instance join token sweep failed");
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sweep(), every).unref();
  return () => clearInterval(timer);
}
