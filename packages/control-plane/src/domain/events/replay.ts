import { badRequest } from "../../http/errors.ts";
import { type EventLog, READ_PAGE } from "./event-log.ts";
import { type EventDelivery, eventBlock, type ProjectEventFanout } from "./project-events.ts";

/** The most a Last-Event-ID may be: ids are integers a JSON number holds exactly. */
const MAX_ID = Number.MAX_SAFE_INTEGER;

/**
 * A stream's Last-Event-ID (the header an EventSource sends when it reconnects, or the
 * `lastEventId` query parameter of a client that cannot set headers): undefined when absent or
 * empty; a decimal event id otherwise, or a 400 naming the field.
 */
export function parseLastEventId(header: string | string[] | undefined, query: string | undefined): number | undefined {
  const [field, raw] = header !== undefined && header !== "" ? ["Last-Event-ID", header] : ["lastEventId", query ?? ""];
  if (raw === "") return undefined;
  const text = Array.isArray(raw) ? raw.join(",") : raw.trim();
  if (!/^\d{1,16}$/.test(text) || Number(text) > MAX_ID) {
    throw badRequest(
      field,
      `${field} must be the id of an event of this stream (a decimal integer), got ${JSON.stringify(text.slice(0, 40))}`,
    );
  }
  return Number(text);
}

/** What a replay found before sending anything: whether the events after the id are still all there. */
export type ReplayStart = { lost: false } | { lost: true; oldest: number | null; newest: number | null };

/**
 * Where a stream that resumes after `lastId` starts. The table keeps its newest row through
 * every prune, so an id below the oldest kept (less one) had events pruned after it, and an id
 * above the newest was never given by this database (another one, or one restored from a
 * backup): either way, events were lost.
 */
export async function replayStart(log: EventLog, lastId: number): Promise<ReplayStart> {
  const { oldest, newest } = await log.bounds();
  // An empty table (a new database) has lost nothing after 0, "before the first event".
  if (newest === null ? lastId > 0 : lastId > newest || (oldest !== null && lastId < oldest - 1)) {
    return { lost: true, oldest, newest };
  }
  return { lost: false };
}

/**
 * The block that opens a stream whose missed events are gone (`event: events.lost`, without an
 * id, so the client's Last-Event-ID stays): read the current state from the resources, then
 * follow the live events that come after it.
 */
export function lostBlock(lastId: number, start: ReplayStart & { lost: true }): string {
  const data = {
    lastEventId: lastId,
    oldestKept: start.oldest,
    newest: start.newest,
    message:
      start.newest === null || lastId > start.newest
        ? `event ${lastId} is unknown to this control plane's database: events may have been lost; read the current state from the resources`
        : `events after ${lastId} are past their retention (KEELSON_EVENT_RETENTION_MINUTES / _ROWS) and were lost; read the current state from the resources`,
  };
  return eventBlock(null, "events.lost", JSON.stringify(data));
}

/**
 * Follows a project from `lastId` on: its events after that id from the table, oldest first,
 * then the live ones, each once and in id order. Live events are held back while the table is
 * read (the stream follows before it reads, so nothing falls between them) and then sent,
 * skipping those the replay already sent. `start.lost`: nothing is replayed (the lost block
 * was sent by the caller), and every live event is sent.
 */
export async function followFrom(
  fanout: ProjectEventFanout,
  log: EventLog,
  projectId: string,
  lastId: number,
  start: ReplayStart,
  send: (bytes: string | Buffer) => void,
): Promise<() => void> {
  let live = false;
  let sent = start.lost ? 0 : lastId;
  const held: EventDelivery[] = [];
  const sendLive = (delivery: EventDelivery) => {
    // Past the replay every delivery is new: all of it goes in one write.
    if (delivery.firstId === null || delivery.firstId > sent) send(delivery.bytes);
    else for (const e of delivery.events) if (e.id === null || e.id > sent) send(e.block);
    if (delivery.lastId !== null) sent = Math.max(sent, delivery.lastId);
  };
  const stop = fanout.follow(projectId, (delivery) => (live ? sendLive(delivery) : held.push(delivery)));
  try {
    if (!start.lost) {
      for (;;) {
        const rows = await log.read(sent, { projectId });
        for (const row of rows) send(eventBlock(row.id, row.type, row.payload));
        if (rows.length > 0) sent = (rows.at(-1) as { id: number }).id;
        if (rows.length < READ_PAGE) break;
      }
    }
  } catch (err) {
    stop();
    throw err;
  }
  for (const delivery of held.splice(0)) sendLive(delivery);
  live = true;
  return stop;
}
