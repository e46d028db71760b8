import { type Db, databaseTime, dialectOf, firstRow, instanceTokenChecks } from "@keelson/db";
import { and, eq, isNotNull, lt, or } from "drizzle-orm";
import type { Keelson } from "../../../context.ts";

/**
 * The one way an auto-deployed cluster's instance token is looked at and renewed (aws-token.ts
 * says when it is due), for the sweep (token-sweep.ts) and for a resize (aws-resize.ts) alike:
 * each look is claimed first in `instance_token_checks` with one conditional upsert by the
 * database's clock, so of all replicas on one database at most one looks at a cluster at a
 * time, and one look per hold. Two looks side by side would both read the old token and both
 * write a new launch template version (two tokens).
 *
 * A claim is won when no replica looked within the hold, or when a look under way ran past
 * LOOK_MS (its replica is gone). While a look runs, `looking_until` is set; it is cleared when
 * the look is done, and a failed look gives its claim up, so the next one need not wait out the
 * hold. The sweep skips a cluster it cannot claim; a resize waits for a look under way and then
 * uses what it left (a fresh token, or one found fresh within the hold), for its instances must
 * boot with a token that works.
 */

/**
 * The sweep's period: a quarter of the renewal margin (at most 15 minutes), so a token is looked
 * at several times before it expires.
 */
export function tokenSweepPeriodMs(k: Keelson): number {
  return Math.min((k.settings.awsJoinTokenRenewMinutes * 60_000) / 4, 15 * 60_000);
}

/**
 * How long a look holds: nine tenths of a period, so the replica that looked looks again at its
 * next sweep, and when it is gone another takes over within a period.
 */
export const lookHoldMs = (k: Keelson): number => (tokenSweepPeriodMs(k) * 9) / 10;

/** How long a look (a few launch template calls) may take before another replica may take it over. */
export const LOOK_MS = 2 * 60_000;
/** How often a resize looks again at a look under way on another replica. */
const WAIT_POLL_MS = 200;

/**
 * Claims this look at `clusterId`'s token for `replicaId`: written only when no replica looked
 * within `holdMs` or a look under way ran out (the primary key and the upsert's condition,
 * checked by the database on the row), so of replicas claiming at once one gets it.
 */
export async function claimTokenCheck(db: Db, clusterId: string, replicaId: string, holdMs: number): Promise<boolean> {
  const dialect = dialectOf(db);
  const look = { checkedAt: databaseTime(dialect), checkedBy: replicaId, lookingUntil: databaseTime(dialect, LOOK_MS) };
  const rows = await db
    .insert(instanceTokenChecks)
    .values({ clusterId, ...look })
    .onConflictDoUpdate({
      target: instanceTokenChecks.clusterId,
      set: look,
      setWhere: or(
        lt(instanceTokenChecks.checkedAt, databaseTime(dialect, -holdMs)),
        and(isNotNull(instanceTokenChecks.lookingUntil), lt(instanceTokenChecks.lookingUntil, databaseTime(dialect))),
      ),
    })
    .returning({ clusterId: instanceTokenChecks.clusterId });
  return rows.length > 0;
}

/** This replica's look under way on the cluster. */
const ownLook = (clusterId: string, replicaId: string) =>
  and(
    eq(instanceTokenChecks.clusterId, clusterId),
    eq(instanceTokenChecks.checkedBy, replicaId),
    isNotNull(instanceTokenChecks.lookingUntil),
  );

/**
 * Looks at the cluster's token and renews it when due, if this replica claims the look; answers
 * whether it renewed. Undefined: another replica looked within the hold or is looking.
 */
export async function claimedRenewal(k: Keelson, clusterId: string, now?: Date): Promise<boolean | undefined> {
  const replicaId = k.settings.replicaId;
  if (!(await claimTokenCheck(k.db, clusterId, replicaId, lookHoldMs(k)))) return undefined;
  const { renewInstanceToken } = await import("./aws-token.ts");
  let renewed: boolean;
  try {
    renewed = await renewInstanceToken(k, k.db, clusterId, now);
  } catch (err) {
    // Given up, so the next look (a resize waiting on it, or the next sweep) need not wait out the hold.
    await k.db.delete(instanceTokenChecks).where(ownLook(clusterId, replicaId));
    throw err;
  }
  await k.db.update(instanceTokenChecks).set({ lookingUntil: null }).where(ownLook(clusterId, replicaId));
  return renewed;
}

/**
 * A resize's look: a renewal made (or a token found fresh) within the hold is used as it is; a
 * look under way on another replica is waited for; else this replica looks itself. Answers
 * whether it renewed.
 */
export async function renewBeforeLaunch(
  k: Keelson,
  clusterId: string,
  signal?: AbortSignal,
  now?: Date,
): Promise<boolean> {
  for (;;) {
    // A shutdown does not wait out another replica's look: the step runs again on resume.
    signal?.throwIfAborted();
    const renewed = await claimedRenewal(k, clusterId, now);
    if (renewed !== undefined) return renewed;
    const look = firstRow(
      await k.db
        .select({ lookingUntil: instanceTokenChecks.lookingUntil })
        .from(instanceTokenChecks)
        .where(eq(instanceTokenChecks.clusterId, clusterId)),
    );
    // Done within the hold: its token is fresh enough to boot with (it was looked at under the margin).
    if (look && look.lookingUntil === null) return false;
    // Under way: wait. Gone: the look failed and gave its claim up; claim again at once.
    if (look) await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
  }
}
