import { agentLinks, type Db, databaseUnavailable, lockIds, nodes } from "@keelson/db";
import type { HelloFrame } from "@keelson/protocol";
import { and, eq, inArray, isNotNull, notExists, sql } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Presence, PresencePatch } from "../../agents/link-domain.ts";

/** Hosts named in one heartbeat UPDATE: well under SQLite's and PostgreSQL's bound parameters. */
export const SEEN_BATCH_HOSTS = 500;

/**
 * The heartbeat part of a flush as UPDATE statements: hosts last seen in the same second share
 * one statement (`... WHERE id IN (...)`), at most SEEN_BATCH_HOSTS each. The hub pings every
 * host in one sweep, so their pongs fall in one or two seconds: 15,000 hosts are about 30
 * statements, not 15,000 (each one built by the query builder and run on its own).
 */
export function seenBatches(
  seen: Iterable<[hostId: string, second: number]>,
  originMs: number,
): { at: string; hostIds: string[] }[] {
  const bySecond = new Map<number, string[]>();
  for (const [hostId, second] of seen) {
    const ids = bySecond.get(second);
    if (ids) ids.push(hostId);
    else bySecond.set(second, [hostId]);
  }
  const batches: { at: string; hostIds: string[] }[] = [];
  for (const [second, ids] of bySecond) {
    const at = new Date(originMs + second * 1000).toISOString();
    for (let i = 0; i < ids.length; i += SEEN_BATCH_HOSTS)
      batches.push({ at, hostIds: ids.slice(i, i + SEEN_BATCH_HOSTS) });
  }
  return batches;
}

/** How soon a batch the database could not take is tried again. */
const PRESENCE_RETRY_MS = 2_000;

export interface PresenceOptions {
  /** State changes (connect, disconnect, facts, status) reach the table within this. Default 100 ms. */
  flushDelayMs?: number;
  /** Heartbeat-only `lastSeen` updates (to the second) are written at most this often per host. Default 30 s. */
  seenIntervalMs?: number;
}

/**
 * Writes agent presence to the nodes table in batches. Ten thousand agents each answering a
 * ping every few seconds would otherwise be ten thousand SQLite transactions per interval;
 * here heartbeats only mark a host as seen in memory and one transaction per `seenIntervalMs`
 * writes them all, while state changes are coalesced per host and written within
 * `flushDelayMs` (a connect storm becomes a few large transactions, not thousands of small).
 */
export class PresenceWriter implements Presence {
  private readonly changes = new Map<string, PresencePatch>();
  /** Host → second (since originMs) of its last heartbeat; lastSeen is written to the second. */
  private readonly seen = new Map<string, number>();
  private readonly originMs = Math.floor(Date.now() / 1000) * 1000;
  private readonly flushDelayMs: number;
  private readonly seenTimer: NodeJS.Timeout;
  private changeTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The flush running or last run; each flush starts after it (flushPending never rejects). */
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    private readonly log: FastifyBaseLogger,
    options: PresenceOptions = {},
  ) {
    this.flushDelayMs = options.flushDelayMs ?? 100;
    this.seenTimer = setInterval(() => void this.flush(), options.seenIntervalMs ?? 30_000);
    this.seenTimer.unref();
  }

  /**
   * Hosts marked connected whose link no replica holds (agent_links, replicas/links.ts): left
   * so by a process that died without draining, this one's previous process included. Hosts
   * linked to another live replica stay connected.
   */
  async resetUnlinked(): Promise<number> {
    const reset = await this.db
      .update(nodes)
      .set({ agentConnected: 0 })
      .where(
        and(
          eq(nodes.agentConnected, 1),
          notExists(
            this.db
              .select({ one: sql`1` })
              .from(agentLinks)
              .where(and(eq(agentLinks.hostId, nodes.id), isNotNull(agentLinks.replica))),
          ),
        ),
      )
      .returning({ id: nodes.id });
    return reset.length;
  }

  connected(hostId: string, hello: HelloFrame, now = new Date()): void {
    this.change(hostId, {
      name: hello.hostname,
      primaryIp: hello.primaryIp,
      facts: hello.facts,
      agentVersion: hello.agentVersion,
      agentStatus: hello.agentStatus,
      agentError: hello.agentError ?? null,
      agentConnected: 1,
      lastSeen: now.toISOString(),
      // No `status` here: it is the node's Kubernetes state, which only its node.report sets
      // (a reconnect of a converging or failed node must not read as ok).
    });
  }

  disconnected(hostId: string, now = new Date()): void {
    this.change(hostId, { agentConnected: 0, lastSeen: now.toISOString() });
  }

  change(hostId: string, patch: PresencePatch): void {
    if (this.closed) return;
    this.changes.set(hostId, { ...this.changes.get(hostId), ...patch });
    this.changeTimer ??= setTimeout(() => void this.flush(), this.flushDelayMs);
  }

  /**
   * A heartbeat: remembered now, written with the next periodic flush. Every agent's pong comes
   * here (3,000 a second with 15,000 agents at a 5 s heartbeat), so it stores a small integer
   * (whole seconds since the writer started) and nothing else: no Date, no string.
   */
  touch(hostId: string, nowMs = Date.now()): void {
    if (this.closed) return;
    this.seen.set(hostId, Math.floor((nowMs - this.originMs) / 1000));
  }

  /**
   * Writes everything pending in one transaction, after any flush still running: two
   * transactions at once on PostgreSQL may take a host's row lock in either order, and a
   * connect written after the disconnect that followed it would leave the host "connected".
   */
  flush(): Promise<void> {
    const next = this.flushing.then(() => this.flushPending());
    this.flushing = next;
    return next;
  }

  private async flushPending(): Promise<void> {
    if (this.changeTimer) clearTimeout(this.changeTimer);
    this.changeTimer = undefined;
    if (this.changes.size === 0 && this.seen.size === 0) return;
    const changes = [...this.changes];
    const seen = [...this.seen];
    this.changes.clear();
    this.seen.clear();
    try {
      await this.db.transaction(async (tx) => {
        // Every host this flush writes, locked in one order first (see lockIds): an attach
        // locking some of the same hosts waits for this flush instead of deadlocking with it.
        await lockIds(tx, nodes, [...new Set([...changes.map(([id]) => id), ...seen.map(([id]) => id)])]);
        for (const [hostId, patch] of changes) await tx.update(nodes).set(patch).where(eq(nodes.id, hostId));
        for (const batch of seenBatches(seen, this.originMs))
          await tx.update(nodes).set({ lastSeen: batch.at }).where(inArray(nodes.id, batch.hostIds));
      });
    } catch (err) {
      const away = databaseUnavailable(err);
      if (away && !this.closed) {
        // The database away or the storage full: put the batch back under anything newer (a
        // host's facts, its condition among them, must not be lost) and try again later.
        for (const [hostId, patch] of changes) this.changes.set(hostId, { ...patch, ...this.changes.get(hostId) });
        for (const [hostId, at] of seen) if (!this.seen.has(hostId)) this.seen.set(hostId, at);
        this.log.warn({ reason: away, hosts: changes.length + seen.length }, "agent presence not written; retrying");
        this.changeTimer ??= setTimeout(() => void this.flush(), PRESENCE_RETRY_MS);
        return;
      }
      // Presence is advisory and rewritten on the next event; losing one batch must not take
      // the hub down.
      this.log.error({ err, hosts: changes.length + seen.length }, "could not write agent presence");
    }
  }

  /** Final flush; later events are ignored (the database may be closing). */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    clearTimeout(this.changeTimer);
    clearInterval(this.seenTimer);
  }
}
