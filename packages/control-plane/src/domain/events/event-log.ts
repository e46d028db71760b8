import {
  commitOrderLock,
  type Db,
  databaseTime,
  dialectOf,
  events,
  firstColumn,
  rowsOf,
  StatementBatch,
} from "@keelson/db";
import { and, asc, eq, gt, lte, ne, or, type SQL, sql } from "drizzle-orm";
import { notifyCall } from "../../replicas/channels.ts";

/** Events written by one statement at most (a 1,000-node batch's reports fit). */
const MAX_BATCH = 1_000;
/** Rows read back per query (replays and other replicas' events page through). */
export const READ_PAGE = 1_000;
/**
 * The advisory lock every events INSERT takes on PostgreSQL, so ids commit in order
 * (commitOrderLock); not the migration lock's key ("keel").
 */
const EVENT_ORDER_LOCK = 0x6b657674; // "kevt"

/** An event as the streams send it: its `data:` line is `payload`, as stored. */
export interface NewEvent {
  projectId: string;
  type: string;
  payload: string;
}

export interface StoredEvent extends NewEvent {
  id: number;
}

/** The ids the table holds (null: none yet). */
export interface EventBounds {
  oldest: number | null;
  newest: number | null;
}

/**
 * The events table (schema.ts `events`): appends in batches, reads rows after an id, prunes.
 * Appends that arrive together are one statement (StatementBatch: a rollout batch's hundred
 * reports are one INSERT, not a hundred), which on PostgreSQL also takes the commit-order lock
 * and notifies every replica of the batch's newest id (the `events` channel, ids only) in the
 * same statement.
 */
export class EventLog {
  private readonly batch = new StatementBatch<NewEvent, number>((items) => this.write(items), {
    maxItems: MAX_BATCH,
  });

  constructor(
    private readonly db: Db,
    private readonly replicaId: string,
  ) {}

  /** Stores one event; resolves with its id once committed (rejects when the store refused it). */
  append(event: NewEvent): Promise<number> {
    return this.batch.add(event);
  }

  private async write(items: NewEvent[]): Promise<number[]> {
    const dialect = dialectOf(this.db);
    const rows = rowsOf(
      items.map((e) => ({ p: e.projectId, t: e.type, d: e.payload })),
      {
        r_project: { key: "p", type: "text" },
        r_type: { key: "t", type: "text" },
        r_payload: { key: "d", type: "text" },
      },
    );
    const insert = (from: SQL) =>
      sql`insert into ${events} (project_id, type, payload, replica) select r_project, r_type, r_payload, ${this.replicaId} from ${from}${rows} as r returning id`;
    const ids =
      dialect === "sqlite"
        ? await firstColumn(this.db, insert(sql``))
        : await firstColumn(
            this.db,
            sql`with ordered as (${commitOrderLock(EVENT_ORDER_LOCK)}), ins as (${insert(sql`ordered, `)}), woken as (select ${notifyCall("events", sql`(select max(id) from ins)::text`)}) select ins.id from ins, woken`,
          );
    // One statement's rows take consecutive ids in the order selected: hand them out in order.
    const sorted = ids.map(Number).sort((a, b) => a - b);
    if (sorted.length !== items.length)
      throw new Error(`events insert returned ${sorted.length} ids for ${items.length}`);
    return sorted;
  }

  /**
   * Events with `afterId < id <= upTo`, oldest first, at most READ_PAGE: of one project (a
   * replay), or those other replicas wrote (this replica's streams got its own already).
   */
  async read(
    afterId: number,
    scope: { projectId: string } | { othersThan: string },
    upTo?: number,
  ): Promise<StoredEvent[]> {
    const rows = await this.db
      .select({ id: events.id, projectId: events.projectId, type: events.type, payload: events.payload })
      .from(events)
      .where(
        and(
          gt(events.id, afterId),
          upTo === undefined ? undefined : lte(events.id, upTo),
          "projectId" in scope ? eq(events.projectId, scope.projectId) : ne(events.replica, scope.othersThan),
        ),
      )
      .orderBy(asc(events.id))
      .limit(READ_PAGE);
    return rows.map((r) => ({ ...r, id: Number(r.id) }));
  }

  async bounds(): Promise<EventBounds> {
    const [row] = await this.db
      .select({ oldest: sql<number | null>`min(${events.id})`, newest: sql<number | null>`max(${events.id})` })
      .from(events);
    const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
    return { oldest: num(row?.oldest), newest: num(row?.newest) };
  }

  /**
   * Deletes events older than `retentionMs` and the oldest beyond `maxRows`, but never the newest
   * row: it marks how far ids went, so a Last-Event-ID from before the prune is known as lost.
   */
  async prune(retentionMs: number, maxRows: number): Promise<number> {
    const newest = sql`(select max(id) from ${events})`;
    const gone = await this.db
      .delete(events)
      .where(
        and(
          sql`${events.id} < ${newest}`,
          or(
            sql`${events.createdAt} < ${databaseTime(dialectOf(this.db), -retentionMs)}`,
            sql`${events.id} <= ${newest} - ${maxRows}`,
          ),
        ),
      )
      .returning({ id: events.id });
    return gone.length;
  }

  /** This replica's id (the rows it wrote carry it). */
  get replica(): string {
    return this.replicaId;
  }
}
