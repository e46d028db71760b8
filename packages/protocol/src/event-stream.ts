import { Backoff } from "./backoff.ts";

/**
 * The client side of the control plane's events stream (`GET /v4/{project}/events`,
 * text/event-stream), shared by the CLI (undici) and the web console (fetch): the parser of its
 * blocks, and a follower that reconnects by itself after a drop, sending `Last-Event-ID` with the
 * id of the last event it handled, so that the server replays what was missed (on any replica)
 * and nothing is handled twice. Each client brings its own HTTP request (`connect`).
 *
 * Reconnects wait 0.5 s, doubling to 5 s (little jitter: one operator, not thousands of agents),
 * for at most `giveUpMs` since the stream was last up; an answer that will not change by asking
 * again (any 4xx but 429: a Last-Event-ID the server refuses, a token revoked) ends it at once
 * with the server's words.
 */

/** One event of the stream: its `event:` name, its JSON `data:`, and its `id:` when it had one. */
export interface StreamEvent {
  id?: string;
  name: string;
  data: Record<string, unknown>;
}

/** Delays between reconnects: 0.5 s doubling to 5 s. */
export const RECONNECT_BACKOFF = { initialMs: 500, maxMs: 5_000, factor: 2, jitter: 0.1, stableAfterMs: 10_000 };

/**
 * Splits text/event-stream text into events (WHATWG HTML, "server-sent events", interpreting an
 * event stream): `id:` sets the last event id even in a block without data (the stream's
 * opening block names the newest id that way), comment lines are skipped, and a block whose
 * data is not JSON is dropped.
 */
export class EventStreamParser {
  lastEventId: string | undefined;
  private buffer = "";

  constructor(lastEventId?: string) {
    this.lastEventId = lastEventId;
  }

  /** Takes the next piece of text; returns the events it completed. */
  push(text: string): StreamEvent[] {
    this.buffer += text.replace(/\r\n?/g, "\n");
    const out: StreamEvent[] = [];
    for (let end = this.buffer.indexOf("\n\n"); end !== -1; end = this.buffer.indexOf("\n\n")) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const event = this.block(block);
      if (event) out.push(event);
    }
    return out;
  }

  private block(block: string): StreamEvent | undefined {
    let name = "message";
    let id: string | undefined;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
      else if (field === "id" && !value.includes("\0")) {
        this.lastEventId = value;
        id = value;
      }
    }
    if (data.length === 0) return undefined;
    try {
      const parsed = JSON.parse(data.join("\n")) as unknown;
      if (typeof parsed !== "object" || parsed === null) return undefined;
      return {
        ...(id === undefined ? {} : { id }),
        name,
        data: parsed as Record<string, unknown>,
      };
    } catch {
      return undefined;
    }
  }
}

/** Why a follower stopped reconnecting: the last failure, and whether the server refused outright. */
export class StreamGaveUp extends Error {
  override name = "StreamGaveUp";
  constructor(
    message: string,
    override readonly cause: unknown,
    readonly refused: boolean,
    readonly attempts: number,
  ) {
    super(message);
  }
}

export interface ResumingStreamOptions {
  /**
   * Opens the stream, with `Last-Event-ID: lastEventId` when given; resolves with its text as it
   * arrives, rejects when it cannot be opened (unreachable, or the server's error answer).
   */
  connect(lastEventId: string | undefined, signal: AbortSignal): Promise<AsyncIterable<string>>;
  /** Whether a failure to connect may pass by asking again (unreachable, 5xx, 429). */
  retryable(error: unknown): boolean;
  /** Whether the first opening is retried too (a page); else its failure ends the follower at once (a command). */
  retryOpen?: boolean;
  /** How long the stream may stay down before the follower gives up. */
  giveUpMs: number;
  /** Each event, once, in the server's order. */
  onEvent(event: StreamEvent): void;
  /** The stream dropped or could not be opened: the next attempt is in `delayMs`. */
  onDrop?(reason: unknown, attempt: number, delayMs: number): void;
  /** A stream is open again after a drop, resuming after `lastEventId` (none: the events in the gap are unknown). */
  onResume?(lastEventId: string | undefined): void;
}

export interface ResumingStream {
  /** Resolves once the first stream is open and its opening block read: nothing after this is missed. */
  opened: Promise<void>;
  /** Resolves when closed; rejects with StreamGaveUp when the follower gave up. */
  done: Promise<void>;
  close(): void;
}

const numericId = (id: string | undefined) => (id !== undefined && /^\d+$/.test(id) ? Number(id) : undefined);

/** Follows the stream until closed, reconnecting after drops (see the module's comment). */
export function followResuming(options: ResumingStreamOptions): ResumingStream {
  const abort = new AbortController();
  const backoff = new Backoff(RECONNECT_BACKOFF);
  const describe = (e: unknown) => (e instanceof Error ? e.message : String(e));
  let lastEventId: string | undefined;
  /** The newest numeric id handled: a replayed event at or below it is not handled again. */
  let handled = 0;
  let isOpened = false;
  let markOpenedOnce: () => void = () => undefined;
  const markOpened = () => {
    isOpened = true;
    markOpenedOnce();
  };
  let failOpened: (error: unknown) => void = () => undefined;
  const opened = new Promise<void>((resolve, reject) => {
    markOpenedOnce = resolve;
    failOpened = reject;
  });
  // A follower that is never awaited (a page's) must not leave an unhandled rejection behind.
  opened.catch(() => undefined);

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      abort.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });

  /** One connection, read to its end; true when it was up (its first text arrived). */
  const once = async (onUp: (resumedAfter: string | undefined) => void): Promise<boolean> => {
    const from = lastEventId;
    const chunks = await options.connect(from, abort.signal);
    const parser = new EventStreamParser(from);
    let up = false;
    try {
      for await (const text of chunks) {
        if (!up) {
          up = true;
          backoff.connected();
          onUp(from);
        }
        for (const event of parser.push(text)) {
          const n = numericId(event.id);
          if (n !== undefined && n <= handled) continue;
          if (n !== undefined) handled = n;
          options.onEvent(event);
        }
        lastEventId = parser.lastEventId;
        const id = numericId(lastEventId);
        if (id !== undefined && id > handled) handled = id;
      }
    } catch (error) {
      // A stream cut after it was up is a drop like its end; one that never answered is a failure.
      if (!up) throw error;
    }
    return up;
  };

  const run = async (): Promise<void> => {
    let downSince: number | undefined;
    let dropped = false;
    let atDeadline = false;
    for (;;) {
      let failure: unknown = new Error("the server ended the stream");
      try {
        const up = await once((resumedAfter) => {
          if (dropped) options.onResume?.(resumedAfter);
          dropped = false;
          downSince = undefined;
          atDeadline = false;
          markOpened();
        });
        if (abort.signal.aborted) return;
        if (up) backoff.disconnected();
      } catch (error) {
        if (abort.signal.aborted) return;
        failure = error;
        const first = !isOpened;
        if (!options.retryable(error) || (first && !options.retryOpen)) {
          const refused = !options.retryable(error);
          throw new StreamGaveUp(
            refused ? `the events stream was refused: ${describe(error)}` : describe(error),
            error,
            refused,
            backoff.attempts + 1,
          );
        }
      }
      downSince ??= Date.now();
      // The last attempt is made at the deadline itself; when it fails too, the follower gives up.
      const left = downSince + options.giveUpMs - Date.now();
      if (atDeadline || left <= 0) {
        const down = Math.round((Date.now() - downSince) / 100) / 10;
        throw new StreamGaveUp(
          `the events stream stayed down for ${down}s (${backoff.attempts} attempts to reconnect): ${describe(failure)}`,
          failure,
          false,
          backoff.attempts,
        );
      }
      const wait = backoff.next();
      atDeadline = wait >= left;
      const delay = Math.min(wait, left);
      options.onDrop?.(failure, backoff.attempts, delay);
      dropped = true;
      await sleep(delay);
      if (abort.signal.aborted) return;
    }
  };

  const done = run().catch((error: unknown) => {
    failOpened(error);
    throw error;
  });
  done.catch(() => undefined);
  return {
    opened,
    done,
    close() {
      abort.abort();
      markOpenedOnce();
    },
  };
}
