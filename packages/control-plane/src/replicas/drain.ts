import { type Db, databaseTime, dialectOf, lockRows, replicas } from "@keelson/db";
import { eq, gt } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import { conflict, notFound } from "../http/errors.ts";
import type { Channels } from "./channels.ts";

/**
 * Draining a replica for maintenance (`POST /v1/replicas/{id}/drain`, `keelson replicas drain`):
 * any replica marks the target's row (`draining_since`) and wakes it on the `drains` channel;
 * the target then claims no operation, hands over those it holds (runner.handOver) and closes
 * its agent links with going-away (hub.handOver), so the agents link to another URL of their
 * list, and ends its events streams (OpenStreams), whose clients resume with Last-Event-ID. A
 * notification missed (its LISTEN connection was away) is caught at the next heartbeat, which
 * reads the row. The mark stays until the replica restarts, which clears it: back in service.
 */

/** What hands its part over at a drain: the runner, the agent hub. */
export interface DrainTarget {
  handOver(): Promise<unknown>;
}

export interface ReplicaDrainOptions {
  db: Db;
  channels: Channels;
  replicaId: string;
  leaseMs: number;
  log: FastifyBaseLogger;
  runner: DrainTarget;
  agents: DrainTarget;
  /** The events streams served here: ended, so their clients resume elsewhere. */
  streams: DrainTarget;
}

export class ReplicaDrain {
  private begun: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly options: ReplicaDrainOptions) {}

  /** Whether this replica drains (`/readyz` 503 "draining"). */
  get draining(): boolean {
    return this.begun !== undefined;
  }

  async listen(): Promise<void> {
    this.unlisten = await this.options.channels.listen("drains", (id) => {
      if (id === this.options.replicaId) this.begin("asked on the drains channel");
    });
  }

  async close(): Promise<void> {
    await this.unlisten?.();
  }

  /**
   * Marks replica `id` draining (idempotent) and wakes it. Refuses an unknown id (404), a
   * replica that is not live (409 `replica_gone`: nothing to drain) and the last live replica
   * that is not draining (409 `last_replica`: nobody would take its work over). The check and
   * the mark are one transaction holding every replica row: two drains of two replicas at once
   * (through two replicas) are decided one after the other, so they cannot both pass and leave
   * none to take the work over.
   */
  async request(id: string): Promise<void> {
    const { db, leaseMs, channels } = this.options;
    const dialect = dialectOf(db);
    const fresh = gt(replicas.heartbeatAt, databaseTime(dialect, -leaseMs));
    await db.transaction(
      async (tx) => {
        const all = await lockRows(tx, replicas, undefined);
        const row = all.find((r) => r.id === id);
        if (!row) throw notFound("replica", id);
        // Live by the database's clock (as every lease here), read under the locks.
        const live = new Set((await tx.select({ id: replicas.id }).from(replicas).where(fresh)).map((r) => r.id));
        if (!live.has(id))
          throw conflict(`replica ${id} is not live (no heartbeat within the lease): nothing to drain`, "replica_gone");
        if (row.drainingSince !== null) return;
        if (!all.some((r) => r.id !== id && r.drainingSince === null && live.has(r.id))) {
          throw conflict(
            `replica ${id} is the last live replica that is not draining: no other would take its operations and agents over`,
            "last_replica",
          );
        }
        await tx
          .update(replicas)
          .set({ drainingSince: databaseTime(dialect) })
          .where(eq(replicas.id, id));
      },
      // SQLite: take the write lock at BEGIN, so a second server on the file waits instead of
      // failing its upgrade from a read lock (PostgreSQL's row locks above do that there).
      dialect === "sqlite" ? { behavior: "immediate" } : undefined,
    );
    // Also when already draining: a replica that missed the first notification hears this one.
    await channels.notify("drains", id);
  }

  /** Starts this replica's drain, once; resolves when its operations and links are handed over. */
  begin(why: string): Promise<void> {
    if (this.begun) return this.begun;
    const { runner, agents, streams, log, replicaId } = this.options;
    log.warn({ replica: replicaId, why }, "draining: handing over operations and agent links");
    this.begun = (async () => {
      const results = await Promise.allSettled([runner.handOver(), agents.handOver(), streams.handOver()]);
      for (const r of results)
        if (r.status === "rejected") log.warn({ err: r.reason, replica: replicaId }, "a drain hand-over failed");
      log.info({ replica: replicaId }, "drained: no operation claimed and no agent link held here");
    })();
    return this.begun;
  }
}
