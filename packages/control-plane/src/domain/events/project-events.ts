import type { FastifyBaseLogger } from "fastify";
import { nodeEventRecord } from "../../agents/node-event-records.ts";
import type { NodeEvent, NodeEvents } from "../../agents/node-events.ts";
import type { PeerEventSink } from "../../agents/peer-node-events.ts";
import type { Channels } from "../../replicas/channels.ts";
import type { OperationRunner } from "../../runner/runner.ts";
import type { OperationEvent } from "../../runner/types.ts";
import { logWriteFailure } from "../../storage/log-failure.ts";
import { type EventLog, type NewEvent, READ_PAGE, type StoredEvent } from "./event-log.ts";

export type ProjectEventName =
  | OperationEvent["type"]
  | "node.report"
  | "node.connected"
  | "node.disconnected"
  | "node.agent";

/** One event as streamed: its id (null when the store refused it: sent without one) and its block. */
export interface StreamedEvent {
  id: number | null;
  /** `id: <n>\nevent: <name>\ndata: <json>\n\n`, encoded once. */
  block: Buffer;
}

/**
 * The events of a project delivered in one turn of the event loop, in id order: each block, and
 * all of them joined, the same Buffer for every follower of the project. A follower writes
 * `bytes` in one write, no matter how many clients or events: nothing is encoded or copied per
 * client, and a slow client's backlog holds references to these Buffers, not copies.
 */
export interface EventDelivery {
  events: readonly StreamedEvent[];
  bytes: Buffer;
  /** The first event's id that is not null (null when none has one). */
  firstId: number | null;
  /** The last event's id that is not null (null when none has one). */
  lastId: number | null;
}

/** Called with each delivery of the followed project (EventDelivery). */
export type ProjectEventSink = (delivery: EventDelivery) => void;

/** The server-sent-events block of an event. */
export function eventBlock(id: number | null, type: string, payload: string): string {
  return `${id === null ? "" : `id: ${id}\n`}event: ${type}\ndata: ${payload}\n\n`;
}

export interface FanoutSources {
  runnerEvents: OperationRunner["events"];
  nodeEvents: NodeEvents["all"];
  log: EventLog;
  /** PostgreSQL's channels, to read other replicas' events when notified; absent on SQLite (one replica). */
  channels?: Channels;
  /** Also given other replicas' events, when it wants them (with `channels`: peer-node-events.ts). */
  peers?: PeerEventSink;
  logger: FastifyBaseLogger;
}

/**
 * The project event streams of one replica. Follows the runner's operation events and the hub's
 * node events for as long as the server runs (they are stored whether or not a stream is open,
 * for clients that reconnect with Last-Event-ID), encodes each once, appends it to the events
 * table (batched, EventLog) and hands it, with its id, to this replica's streams of its project,
 * together with the project's other events of the same turn (EventDelivery).
 *
 * On PostgreSQL every append notifies the newest id; each replica then reads the rows after
 * the last id it delivered that other replicas wrote, and delivers them too, in id order (ids
 * commit in order: EventLog). `delivered` is the id up to which every event was delivered here;
 * a notification that comes while one of this replica's own appends is on its way waits for
 * it, so its own events, delivered from memory, are never read back nor sent twice.
 */
export class ProjectEventFanout {
  private readonly byProject = new Map<string, Set<ProjectEventSink>>();
  /** Each project's events of this turn, delivered together at its end (`flush`). */
  private readonly pending = new Map<string, StreamedEvent[]>();
  private flushing: NodeJS.Immediate | undefined;
  private followers = 0;
  private delivered = 0;
  /** This replica's appends sent and not yet delivered. */
  private inflight = 0;
  /** The newest id notified (read up to it once no own append is in flight). */
  private notified = 0;
  /** A read of what was notified is queued and has not started: later notifications join it. */
  private readQueued = false;
  /** Deliveries, one after another, in id order. */
  private chain: Promise<void> = Promise.resolve();
  private unlisten: (() => Promise<void>) | undefined;
  /** The last append was refused (logged once until one is stored again). */
  private failing = false;

  constructor(private readonly sources: FanoutSources) {}

  /** Starts recording (and on PostgreSQL, reading other replicas' events). */
  async start(): Promise<void> {
    const { runnerEvents, nodeEvents, channels } = this.sources;
    runnerEvents.on("event", this.onOperation);
    nodeEvents.on("node-report", this.onNode);
    nodeEvents.on("link", this.onNode);
    nodeEvents.on("agent", this.onNode);
    if (!channels) return;
    this.delivered = (await this.sources.log.bounds()).newest ?? 0;
    // After a gap in the LISTEN connection, what was missed is read as if just notified.
    const catchUp = () =>
      void this.sources.log.bounds().then(
        (b) => this.onNotified(b.newest ?? 0),
        (err: unknown) => this.sources.logger.warn({ err }, "reading the newest event id failed"),
      );
    this.unlisten = await channels.listen("events", (payload) => this.onNotified(Number(payload)), catchUp);
  }

  async stop(): Promise<void> {
    const { runnerEvents, nodeEvents } = this.sources;
    runnerEvents.off("event", this.onOperation);
    nodeEvents.off("node-report", this.onNode);
    nodeEvents.off("link", this.onNode);
    nodeEvents.off("agent", this.onNode);
    await this.unlisten?.();
    await this.settled();
    this.flush();
  }

  /** Follows one project until the returned function is called (when the client goes away). */
  follow(projectId: string, sink: ProjectEventSink): () => void {
    let sinks = this.byProject.get(projectId);
    if (!sinks) {
      sinks = new Set();
      this.byProject.set(projectId, sinks);
    }
    sinks.add(sink);
    this.followers++;
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      const current = this.byProject.get(projectId);
      current?.delete(sink);
      if (current?.size === 0) this.byProject.delete(projectId);
      this.followers--;
    };
  }

  /** Streams open (tests). */
  get size(): number {
    return this.followers;
  }

  /** Resolves once every event recorded so far was delivered here (tests). */
  async settled(): Promise<void> {
    for (let chain = this.chain; ; chain = this.chain) {
      await chain;
      if (chain === this.chain && this.inflight === 0 && this.flushing === undefined) return;
      await new Promise((r) => setImmediate(r));
    }
  }

  /**
   * Queues the event for its project's followers until the end of this turn: the events that
   * arrive together (a rollout batch's reports are one statement) reach each client as one write.
   */
  private deliver(id: number | null, event: NewEvent): void {
    if (!this.byProject.has(event.projectId)) return;
    let events = this.pending.get(event.projectId);
    if (!events) {
      events = [];
      this.pending.set(event.projectId, events);
    }
    events.push({ id, block: Buffer.from(eventBlock(id, event.type, event.payload)) });
    this.flushing ??= setImmediate(() => this.flush());
  }

  private flush(): void {
    if (this.flushing) clearImmediate(this.flushing);
    this.flushing = undefined;
    const pending = [...this.pending];
    this.pending.clear();
    for (const [projectId, events] of pending) {
      const sinks = this.byProject.get(projectId);
      if (!sinks) continue;
      const ids = events.flatMap((e) => (e.id === null ? [] : [e.id]));
      const delivery: EventDelivery = {
        events,
        bytes: events.length === 1 ? (events[0] as StreamedEvent).block : Buffer.concat(events.map((e) => e.block)),
        firstId: ids[0] ?? null,
        lastId: ids.at(-1) ?? null,
      };
      for (const sink of sinks) sink(delivery);
    }
  }

  private record(projectId: string, type: ProjectEventName, payload: string): void {
    const event: NewEvent = { projectId, type, payload };
    this.inflight++;
    this.sources.log.append(event).then(
      (id) =>
        this.enqueue(async () => {
          this.inflight--;
          if (this.failing) {
            this.failing = false;
            this.sources.logger.info("events are stored again");
          }
          // Other replicas' events before this one first (all committed: ids commit in order).
          if (this.sources.channels && id - 1 > this.delivered) await this.readOthers(id - 1);
          this.deliver(id, event);
          this.delivered = Math.max(this.delivered, id);
          await this.readNotified();
        }),
      (err: unknown) =>
        this.enqueue(async () => {
          this.inflight--;
          // Once per spell (a full disk refuses every one of a rollout's reports).
          if (!this.failing)
            logWriteFailure(this.sources.logger, err, { type }, "storing events failed; streamed without ids", "warn");
          this.failing = true;
          this.deliver(null, event);
          await this.readNotified();
        }),
    );
  }

  /** What other replicas notified, up to the newest id, once no own append of this replica is in flight. */
  private async readNotified(): Promise<void> {
    if (this.inflight === 0 && this.notified > this.delivered) await this.readOthers(this.notified);
  }

  /**
   * One read for the notifications that came while the chain was busy (each replica's append
   * batch notifies; with agents spread over three replicas the owner of a rollout got a read per
   * notification): up to the newest id notified, committed like every id below it.
   */
  private onNotified(newest: number): void {
    if (!Number.isSafeInteger(newest)) return;
    this.notified = Math.max(this.notified, newest);
    if (this.readQueued) return;
    this.readQueued = true;
    this.enqueue(async () => {
      this.readQueued = false;
      // An own append on its way may hold ids below the newest: read after it is delivered.
      await this.readNotified();
    });
  }

  /** Delivers the rows other replicas wrote after `delivered`, up to `upTo`. */
  private async readOthers(upTo: number): Promise<void> {
    const { log, peers } = this.sources;
    if (this.followers === 0 && !peers?.wanted()) {
      // Nobody here to deliver to; a stream opened later starts from now (or replays).
      this.delivered = Math.max(this.delivered, upTo);
      return;
    }
    for (;;) {
      const rows: StoredEvent[] = await log.read(this.delivered, { othersThan: log.replica }, upTo);
      for (const row of rows) {
        this.deliver(row.id, row);
        peers?.deliver(row);
      }
      if (rows.length < READ_PAGE) break;
      this.delivered = (rows.at(-1) as StoredEvent).id;
    }
    this.delivered = Math.max(this.delivered, upTo);
  }

  private enqueue(step: () => Promise<void>): void {
    this.chain = this.chain.then(step).catch((err: unknown) => {
      this.sources.logger.warn({ err }, "delivering other replicas' events failed");
    });
  }

  private readonly onOperation = (e: OperationEvent): void => this.record(e.projectId, e.type, JSON.stringify(e));

  private readonly onNode = (e: NodeEvent): void => {
    const { type, payload } = nodeEventRecord(e);
    this.record(e.projectId, type, payload);
  };
}
