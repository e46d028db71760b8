import {
  agentLinks,
  type Db,
  databaseUnavailable,
  dialectOf,
  type Field,
  hostPresence,
  lockIds,
  nodes,
  rowsOf,
  type Tx,
} from "@keelson/db";
import type { HelloFrame } from "@keelson/protocol";
import { and, eq, isNotNull, notExists, sql } from "drizzle-orm";
import type { FastifyBaseLogger } from "fastify";
import type { Presence, PresencePatch } from "../../agents/link-domain.ts";

/**
 * The heartbeat part of a flush as one statement: an upsert of `host_presence` (schema.ts: a
 * narrow table, so a heartbeat does not rewrite the host's whole row) from one JSON object of
 * host → time, a single parameter however many hosts. Only hosts still in `nodes` get a row
 * (no foreign key, see the table), in host order, so that two replicas writing some of the same
 * hosts (a link moving) take their row locks in one order; and a time never goes back (a late
 * flush of the replica a host just left).
 */
function writeSeen(tx: Tx, seen: Iterable<[hostId: string, second: number]>, originMs: number) {
  const times = new Map<number, string>();
  const object: Record<string, string> = {};
  for (const [hostId, second] of seen) {
    let at = times.get(second);
    if (at === undefined) {
      at = new Date(originMs + second * 1000).toISOString();
      times.set(second, at);
    }
    object[hostId] = at;
  }
  const json = JSON.stringify(object);
  const pairs = dialectOf(tx) === "sqlite" ? sql`json_each(${json})` : sql`json_each_text(cast(${json} as json))`;
  return tx
    .insert(hostPresence)
    .select(
      sql`select seen.key, seen.value from ${pairs} as seen join ${nodes} on ${nodes.id} = seen.key order by seen.key`,
    )
    .onConflictDoUpdate({
      target: hostPresence.hostId,
      set: { lastSeen: sql`excluded.last_seen` },
      setWhere: sql`${hostPresence.lastSeen} < excluded.last_seen`,
    });
}

/** How each column a presence patch may set goes into a batch's rows (rowsOf). */
const PATCH_FIELDS: { [K in keyof Required<PresencePatch>]: Field["type"] } = {
  name: "text",
  primaryIp: "text",
  facts: "json",
  agentVersion: "text",
  agentStatus: "text",
  agentError: "text",
  agentConnected: "integer",
  lastSeen: "text",
  status: "text",
};

/** Hosts written by one statement at most (a connect's patch carries the host's facts, a few KB). */
const PATCHES_PER_STATEMENT = 500;

/**
 * The hosts' pending state changes, one UPDATE … FROM a batch of rows per set of columns
 * (connects set the same eight, disconnects the same two): after a restart of the control plane
 * every agent links again within seconds, and one statement per host was built and run for each
 * connect and each disconnect. The rows are already locked in id order (lockIds, before).
 */
async function writePatches(tx: Tx, changes: [hostId: string, patch: PresencePatch][]): Promise<void> {
  const byColumns = new Map<string, [string, PresencePatch][]>();
  for (const change of changes) {
    // A key given as undefined sets nothing (as drizzle's set() takes it).
    const columns = Object.entries(change[1])
      .flatMap(([key, value]) => (value === undefined ? [] : [key]))
      .sort()
      .join(",");
    const group = byColumns.get(columns);
    if (group) group.push(change);
    else byColumns.set(columns, [change]);
  }
  for (const [columns, group] of byColumns) {
    if (columns === "") continue;
    const keys = columns.split(",") as (keyof PresencePatch)[];
    // Columns named by position (r_1, r_2…): PostgreSQL would fold a camel-cased name.
    const fields: Record<string, Field> = { r_id: { key: "hostId", type: "text" } };
    for (const [i, key] of keys.entries()) fields[`r_${i + 1}`] = { key, type: PATCH_FIELDS[key] };
    const set = Object.fromEntries(keys.map((key, i) => [key, sql.raw(`r.r_${i + 1}`)]));
    for (let at = 0; at < group.length; at += PATCHES_PER_STATEMENT) {
      const rows = rowsOf(
        group.slice(at, at + PATCHES_PER_STATEMENT).map(([hostId, patch]) => ({ hostId, ...patch })),
        fields,
      );
      await tx.update(nodes).set(set).from(sql`${rows} as r`).where(eq(nodes.id, sql`r.r_id`));
    }
  }
}

/**
 * Removes the heartbeats of hosts deleted since (host_presence has no foreign key to cascade):
 * run every SWEEP_EVERY heartbeat flushes, 10 minutes at the default 30 s.
 */
function sweepGone(tx: Tx) {
  return tx
    .delete(hostPresence)
    .where(notExists(tx.select({ one: sql`1` }).from(nodes).where(eq(nodes.id, hostPresence.hostId))));
}
const SWEEP_EVERY = 20;

/** How soon a batch the database could not take is tried again. */
const PRESENCE_RETRY_MS = 2_000;

export interface PresenceOptions {
  /** State changes (connect, disconnect, facts, status) reach the table within this. Default 100 ms. */
  flushDelayMs?: number;
  /** Heartbeat-only `lastSeen` updates (to the second) are written at most this often per host. Default 30 s. */
  seenIntervalMs?: number;
}

/**
 * Writes agent presence in batches: state changes to the nodes table, heartbeats to
 * host_presence. Ten thousand agents each answering a ping every few seconds would otherwise
 * be ten thousand SQLite transactions per interval; here heartbeats only mark a host as seen in
 * memory and one statement per `seenIntervalMs` writes them all, while state changes are
 * coalesced per host and written within
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
  /** Flushes that wrote heartbeats, for the sweep of deleted hosts' rows (the first sweeps). */
  private seenFlushes = 0;
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
      const sweep = seen.length > 0 && this.seenFlushes++ % SWEEP_EVERY === 0;
      await this.db.transaction(async (tx) => {
        // Every host row this flush writes, locked in one order first (see lockIds): an attach
        // locking some of the same hosts waits for this flush instead of deadlocking with it.
        // The heartbeats come after, in host_presence only: they lock no host row.
        await lockIds(
          tx,
          nodes,
          changes.map(([id]) => id),
        );
        await writePatches(tx, changes);
        if (seen.length > 0) await writeSeen(tx, seen, this.originMs);
        if (sweep) await sweepGone(tx);
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
