import { EventEmitter } from "node:events";
import { firstColumn, type PostgresStore, StatementBatch, type Store } from "@keelson/db";
import { type SQL, sql } from "drizzle-orm";

/**
 * How replicas wake each other (DESIGN.md "Replicas"): PostgreSQL's LISTEN/NOTIFY on
 * PostgreSQL, an in-process emitter on SQLite (one replica, so "every replica" is this one).
 *
 * - One LISTEN connection per replica, outside the pool: postgres.js opens it on the first
 *   `listen` and, when it drops, reconnects and subscribes again, then calls `onListen`.
 *   Notifications sent while it was away are lost, so a listener catches up in `onListen`
 *   (reads what it may have missed from the tables): the notification is a wake-up, the row
 *   is the truth.
 * - Payloads are ids, never documents: NOTIFY refuses more than 8,000 bytes, and the reader
 *   reads the row anyway. `notify` refuses a payload over the limit before sending it.
 * - A NOTIFY also reaches its own sender's listeners (as the emitter does on SQLite).
 * - The notifications of one event-loop turn go out in one statement (StatementBatch), each
 *   with its own payload as before: a rollout batch's hundred commands to hosts linked
 *   elsewhere, or a hundred answers, cost one round trip and one transaction, and wake each
 *   listening backend once, not a hundred times (issue 18: a rollout with the agents spread
 *   over three replicas sent one statement per command and per answer).
 *   Identical payloads on one channel within a transaction reach listeners once (PostgreSQL's
 *   rule); a wake-up said twice means no more than once.
 */

/** The channels, by what they carry; their names in the database are the values. */
export const CHANNELS = {
  /** A command inserted: its id, for the replica holding its host's link. */
  commands: "keelson_commands",
  /** A command answered: its id, for the replica waiting for it. */
  commandResults: "keelson_command_results",
  /** A host's link taken or dropped (links.ts). */
  links: "keelson_links",
  /** Events stored (domain/events/event-log.ts): the newest id, for every replica's streams. */
  events: "keelson_events",
  /** A replica asked to drain: its id (drain.ts). */
  drains: "keelson_drains",
  /**
   * Operation leases released by a graceful stop or a drain: the releasing replica's id; the
   * others look for operations to claim at once rather than at their next renewal (runner.ts).
   */
  released: "keelson_released",
} as const;

export type Channel = keyof typeof CHANNELS;

/** PostgreSQL's limit on a NOTIFY payload, in bytes. */
export const NOTIFY_PAYLOAD_LIMIT = 7_999;

export interface Channels {
  /**
   * Calls `handler` with each payload notified on `channel`, and `onListen` each time the
   * subscription is (re)established, the first time included. Resolves once listening; the
   * answer unsubscribes.
   */
  listen(channel: Channel, handler: (payload: string) => void, onListen?: () => void): Promise<() => Promise<void>>;
  notify(channel: Channel, payload: string): Promise<void>;
}

function checkPayload(channel: Channel, payload: string): void {
  if (Buffer.byteLength(payload) > NOTIFY_PAYLOAD_LIMIT) {
    throw new Error(
      `a notification on ${channel} carries ${Buffer.byteLength(payload)} bytes; NOTIFY takes at most ${NOTIFY_PAYLOAD_LIMIT}`,
    );
  }
}

/**
 * A `pg_notify` call on `channel` for a statement that notifies as it writes (PostgreSQL; sent
 * when the statement's transaction commits). `payload` must stay an id: the limit above holds.
 */
export function notifyCall(channel: Channel, payload: SQL): SQL {
  return sql`pg_notify(${CHANNELS[channel]}, ${payload})`;
}

/** The store's channels: LISTEN/NOTIFY on PostgreSQL, in-process on SQLite. */
export function channelsOf(store: Store): Channels {
  return store.dialect === "postgres" ? postgresChannels(store as PostgresStore) : inProcessChannels();
}

function postgresChannels(store: PostgresStore): Channels {
  // In arrival order: the rows of json_array_elements come in array order, pg_notify queues
  // them in that order, and a transaction's notifications are delivered in the order queued.
  const notifications = new StatementBatch<[string, string], void>(async (items) => {
    const query = sql`select pg_notify(n->>0, n->>1) from json_array_elements(${JSON.stringify(items)}::json) as n`;
    await firstColumn(store.db, query);
    return items.map(() => undefined);
  });
  return {
    async listen(channel, handler, onListen) {
      const meta = await store.client.listen(CHANNELS[channel], handler, onListen);
      return () => meta.unlisten();
    },
    async notify(channel, payload) {
      checkPayload(channel, payload);
      await notifications.add([CHANNELS[channel], payload]);
    },
  };
}

/** Channels within this process (SQLite's one replica; tests that run two apps on one SQLite file share one). */
export function inProcessChannels(): Channels {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    async listen(channel, handler, onListen) {
      emitter.on(channel, handler);
      onListen?.();
      return async () => {
        emitter.off(channel, handler);
      };
    },
    async notify(channel, payload) {
      checkPayload(channel, payload);
      // Delivered after the notifier's turn, as a NOTIFY would be.
      setImmediate(() => emitter.emit(channel, payload));
    },
  };
}
