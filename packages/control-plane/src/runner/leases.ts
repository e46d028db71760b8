import { type Db, databaseTime, dialectOf, operations } from "@keelson/db";
import { and, asc, eq, inArray, isNull, lt, or, type SQL, sql } from "drizzle-orm";
import type { Channels } from "../replicas/channels.ts";
import { isUnfinished } from "./store.ts";
import type { OperationRow } from "./types.ts";

/**
 * The claims of operations by replicas (DESIGN.md "Replicas"), each one statement checked by
 * the database: a claim raises the fence and sets owner and lease expiry by the database's
 * clock; every later write of the owner names the fence it claimed with (`heldBy`), so a
 * former owner that wakes up after another claim changes nothing.
 */

/** How this replica holds operations (settings KEELSON_REPLICA_ID and KEELSON_OPERATION_LEASE_*). */
export interface LeaseOptions {
  replicaId: string;
  leaseMs: number;
  /** How often leases are renewed and unclaimed or expired operations looked for. */
  renewMs: number;
  /** Without a renewal for this long the runner stops acting on what it holds (fenced). */
  deadlineMs: number;
  /** Runs first in every renewal (the replica's heartbeat); a throw counts as a failed renewal. */
  heartbeat?: () => Promise<void>;
  /**
   * Where a release is announced and heard (`released`): the operations a graceful stop or a
   * drain gives up are claimed by another replica at once, not up to a renewal later.
   */
  channels?: Channels;
}

export const SINGLE_PROCESS: LeaseOptions = { replicaId: "local", leaseMs: 10_000, renewMs: 2_000, deadlineMs: 7_000 };

/** Thrown where a write of an operation found its fence raised by another claim. */
export class LeaseLost extends Error {
  constructor(id: string) {
    super(`operation ${id} is held by another claim now`);
    this.name = "LeaseLost";
  }
}

/** What a replica's writes of one operation must match: its id and the fence it claimed with. */
export interface Claim {
  readonly owner: string;
  readonly fence: number;
}

/** The condition of an operation this replica may claim now: no owner, its own, or a lease run out. */
function claimable(db: Db, owner: string): SQL {
  return or(
    isNull(operations.owner),
    eq(operations.owner, owner),
    lt(operations.leaseUntil, databaseTime(dialectOf(db))),
  ) as SQL;
}

/**
 * No unfinished operation on the same target was recorded before it: operations on one target
 * run one at a time, in order, whichever replicas hold them. Two recorded in the same
 * millisecond are ordered by id (as `claimableOperations` lists them), so exactly one of them is first.
 */
const firstOnItsTarget = sql`not exists (select 1 from operations as earlier where earlier.target_id = operations.target_id and earlier.state in ('pending', 'running') and (earlier.created_at < operations.created_at or (earlier.created_at = operations.created_at and earlier.id < operations.id)))`;

/**
 * Only the kinds this binary runs: during a rolling upgrade an older replica leaves a newer
 * kind for a replica that knows it, rather than failing it.
 */
function knownKind(kinds: readonly string[]): SQL {
  return kinds.length > 0 ? inArray(operations.kind, [...kinds]) : sql`false`;
}

/**
 * Claims operation `id` for `owner` for `leaseMs`: one conditional UPDATE … RETURNING, so of
 * two replicas claiming at once exactly one gets the row. Undefined: finished, held by another
 * replica whose lease runs, waiting for an earlier operation on its target, or of a kind not in `kinds`.
 */
export async function claimOperation(
  db: Db,
  id: string,
  owner: string,
  leaseMs: number,
  kinds: readonly string[],
): Promise<OperationRow | undefined> {
  const dialect = dialectOf(db);
  const [row] = await db
    .update(operations)
    .set({
      owner,
      fence: sql`${operations.fence} + 1`,
      leaseUntil: databaseTime(dialect, leaseMs),
      state: "running",
      attempts: sql`${operations.attempts} + 1`,
      startedAt: sql`coalesce(${operations.startedAt}, ${databaseTime(dialect)})`,
    })
    .where(and(eq(operations.id, id), isUnfinished(), knownKind(kinds), claimable(db, owner), firstOnItsTarget))
    .returning();
  return row;
}

/** The condition every write of a claimed operation carries (checked by the database). */
export function heldBy(id: string, claim: Claim): SQL {
  return and(eq(operations.id, id), eq(operations.owner, claim.owner), eq(operations.fence, claim.fence)) as SQL;
}

/**
 * Extends the leases of the operations `owner` holds, one statement for all; answers the fence
 * each still has under this owner (an operation missing, or with another fence, is lost).
 */
export async function renewLeases(
  db: Db,
  owner: string,
  ids: readonly string[],
  leaseMs: number,
): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .update(operations)
    .set({ leaseUntil: databaseTime(dialectOf(db), leaseMs) })
    .where(and(eq(operations.owner, owner), inArray(operations.id, [...ids]), isUnfinished()))
    .returning({ id: operations.id, fence: operations.fence });
  return new Map(rows.map((r) => [r.id, r.fence]));
}

/** Gives up the leases of `ids` (a graceful stop): another replica may claim them at once. */
export async function releaseLeases(db: Db, owner: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .update(operations)
    .set({ owner: null, leaseUntil: null })
    .where(and(eq(operations.owner, owner), inArray(operations.id, [...ids])));
}

/**
 * Unfinished operations of `kinds` that `owner` may claim now (pending, its own, or whose lease
 * ran out), oldest first, ties by id.
 */
export async function claimableOperations(
  db: Db,
  owner: string,
  limit: number,
  kinds: readonly string[],
): Promise<Pick<OperationRow, "id" | "targetId">[]> {
  return await db
    .select({ id: operations.id, targetId: operations.targetId })
    .from(operations)
    .where(and(isUnfinished(), knownKind(kinds), claimable(db, owner)))
    .orderBy(asc(operations.createdAt), asc(operations.id))
    .limit(limit);
}
