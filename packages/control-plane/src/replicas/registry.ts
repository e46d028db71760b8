import { type Db, databaseTime, dialectOf, operations, replicas, storageFull, type Tx } from "@keelson/db";
import { and, count, eq, gt, lte, type SQL } from "drizzle-orm";

/**
 * The replicas table (DESIGN.md "Replicas"): who runs on this database, measured by the
 * database's clock. A replica is live while its heartbeat is younger than one lease.
 */

export type ReplicaRow = typeof replicas.$inferSelect;

/** This process as the table records it. */
export interface ReplicaSelf {
  id: string;
  url: string;
  version: string;
  host: string;
  pid: number;
}

/** A start that would make a second live holder of one id, or a second server on SQLite (exit 78). */
export class ReplicaRefused extends Error {
  override name = "ReplicaRefused";
}

/** Whether process `pid` of this machine still runs (EPERM: it does, under another user). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Whether `row`, holding this replica's id, is no obstacle to it: this very process, or a
 * process of this machine that is gone (a crash, or a stop on a full disk that could not
 * remove its row, then a restart). The one rule of the start and of the heartbeat.
 */
function heldByNoOne(row: Pick<ReplicaRow, "host" | "pid">, self: ReplicaSelf): boolean {
  return row.host === self.host && (row.pid === self.pid || !processAlive(row.pid));
}

function heartbeatWithin(db: Tx, ms: number): SQL {
  return gt(replicas.heartbeatAt, databaseTime(dialectOf(db), -ms));
}

/**
 * Records this replica at start. Refuses (ReplicaRefused) when a live replica already holds
 * its id, or on SQLite when any other server uses the file. A row whose heartbeat is fresh but
 * whose process is gone from this machine (a crash, then a restart) is no obstacle; nor is
 * another app of this same process (tests build several).
 */
export async function registerReplica(db: Db, self: ReplicaSelf, leaseMs: number): Promise<void> {
  try {
    // On SQLite the check and the write are one IMMEDIATE transaction: of two servers starting
    // at once on one file, the second waits for the first's write lock, then sees its row.
    if (dialectOf(db) === "sqlite") {
      await db.transaction((tx) => checkAndRecord(tx, self, leaseMs), { behavior: "immediate" });
    } else await checkAndRecord(db, self, leaseMs);
  } catch (err) {
    // A server starts on a full disk (serving reads, refusing writes): its row is written by the
    // first heartbeat after space returns.
    if (!storageFull(err)) throw err;
  }
}

async function checkAndRecord(tx: Tx, self: ReplicaSelf, leaseMs: number): Promise<void> {
  const dialect = dialectOf(tx);
  const single = dialect === "sqlite";
  const live = await tx
    .select()
    .from(replicas)
    .where(single ? heartbeatWithin(tx, leaseMs) : and(eq(replicas.id, self.id), heartbeatWithin(tx, leaseMs)));
  for (const other of live) {
    if (heldByNoOne(other, self)) continue;
    const holder = `pid ${other.pid} on ${other.host}, started ${other.startedAt}, last heartbeat ${other.heartbeatAt}`;
    throw new ReplicaRefused(
      single
        ? `another keelson-server (replica ${other.id}, ${holder}) is using this SQLite database, and SQLite serves one server: stop that one first, or run several replicas on PostgreSQL (KEELSON_DATABASE_URL)`
        : `KEELSON_REPLICA_ID ${self.id} is held by a live replica (${holder}): give each replica its own id`,
    );
  }
  // On SQLite every other row is a server that is gone: the list shows the one that runs.
  if (single) await tx.delete(replicas).where(lte(replicas.heartbeatAt, databaseTime("sqlite", -leaseMs)));
  const now = databaseTime(dialect);
  await tx
    .insert(replicas)
    .values({ ...self, startedAt: now, heartbeatAt: now, agentsHeld: 0 })
    .onConflictDoUpdate({
      target: replicas.id,
      // A restart ends a drain: the replica is back in service.
      set: {
        url: self.url,
        version: self.version,
        host: self.host,
        pid: self.pid,
        startedAt: now,
        heartbeatAt: now,
        drainingSince: null,
      },
    });
}

/**
 * Removes the rows of replicas whose last heartbeat is older than `retentionMs` (crashed ones:
 * a graceful stop removes its own row), so the list does not keep every replica that ever ran.
 */
export async function pruneReplicas(db: Db, retentionMs: number): Promise<number> {
  const gone = await db
    .delete(replicas)
    .where(lte(replicas.heartbeatAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: replicas.id });
  return gone.length;
}

/**
 * The heartbeat, by the database's clock, with the agent links held: one statement, or two when
 * the row is missing (never written on a full disk, or removed) and is written again. Answers
 * since when the row says this replica drains (null: it does not).
 */
export async function heartbeat(db: Db, self: ReplicaSelf, agentsHeld: number): Promise<string | null> {
  const now = databaseTime(dialectOf(db));
  const rows = await db
    .update(replicas)
    .set({ heartbeatAt: now, agentsHeld })
    .where(and(eq(replicas.id, self.id), eq(replicas.pid, self.pid), eq(replicas.host, self.host)))
    .returning({ drainingSince: replicas.drainingSince });
  if (rows[0]) return rows[0].drainingSince;
  const written = await db
    .insert(replicas)
    .values({ ...self, startedAt: now, heartbeatAt: now, agentsHeld })
    .onConflictDoNothing({ target: replicas.id })
    .returning({ id: replicas.id });
  if (written.length > 0 || (await takeOverFromGone(db, self, now, agentsHeld))) return null;
  // Another process took the id (this one was paused past its lease): the renewal fails, and the
  // runner fences itself at its deadline.
  throw new Error(`replica ${self.id}: its id is held by another process`);
}

/**
 * The row of this id is a gone process's of this machine, which the start could not replace
 * (it started on a full disk): it becomes this process's, unless another took it meanwhile.
 */
async function takeOverFromGone(db: Db, self: ReplicaSelf, now: SQL<string>, agentsHeld: number): Promise<boolean> {
  const [row] = await db.select().from(replicas).where(eq(replicas.id, self.id));
  if (!row || !heldByNoOne(row, self)) return false;
  const taken = await db
    .update(replicas)
    .set({ ...self, startedAt: now, heartbeatAt: now, agentsHeld, drainingSince: null })
    .where(and(eq(replicas.id, self.id), eq(replicas.host, row.host), eq(replicas.pid, row.pid)))
    .returning({ id: replicas.id });
  return taken.length > 0;
}

/** The longest time between two prunings of gone replicas' rows. */
const PRUNE_EVERY_MS = 60_000;

/**
 * What the runner calls at every renewal: this replica's heartbeat, and now and then (a tenth
 * of the retention, at most a minute apart) the pruning of replicas gone for longer than it.
 */
export function replicaHeartbeat(
  db: Db,
  self: ReplicaSelf,
  retentionMs: number,
  agentsHeld: () => number,
  /** Told at each heartbeat whose row says this replica drains (drain.ts; a missed notification). */
  onDraining: (since: string) => void,
): () => Promise<void> {
  const every = Math.min(PRUNE_EVERY_MS, retentionMs / 10);
  let prunedAt = Number.NEGATIVE_INFINITY;
  return async () => {
    const draining = await heartbeat(db, self, agentsHeld());
    if (draining) onDraining(draining);
    if (performance.now() - prunedAt < every) return;
    prunedAt = performance.now();
    await pruneReplicas(db, retentionMs);
  };
}

/** A graceful stop: the row goes, so the list shows only replicas that run or died. */
export async function deregisterReplica(db: Db, self: ReplicaSelf): Promise<void> {
  await db
    .delete(replicas)
    .where(and(eq(replicas.id, self.id), eq(replicas.pid, self.pid), eq(replicas.host, self.host)));
}

export interface ReplicaView extends ReplicaRow {
  live: boolean;
  operationsOwned: number;
}

/** Every replica recorded, by id, with the unfinished operations each holds a running lease on. */
export async function listReplicas(db: Db, leaseMs: number): Promise<ReplicaView[]> {
  const dialect = dialectOf(db);
  const rows = await db.select().from(replicas).orderBy(replicas.id);
  const owned = await db
    .select({ owner: operations.owner, n: count() })
    .from(operations)
    .where(and(eq(operations.state, "running"), gt(operations.leaseUntil, databaseTime(dialect))))
    .groupBy(operations.owner);
  const byOwner = new Map(owned.map((o) => [o.owner, Number(o.n)]));
  const fresh = new Set(
    (await db.select({ id: replicas.id }).from(replicas).where(heartbeatWithin(db, leaseMs))).map((r) => r.id),
  );
  return rows.map((r) => ({ ...r, live: fresh.has(r.id), operationsOwned: byOwner.get(r.id) ?? 0 }));
}
