import { followResuming, type StreamEvent, StreamGaveUp } from "@keelson/protocol/event-stream";
import { ApiRefusal, CliError, EXIT } from "./errors.ts";
import type { Cli, Session } from "./session.ts";

/**
 * The project's events stream (`GET /v4/{project}/events`, server-sent events; see the control
 * plane's routes/events.ts): `operation.started|step|finished` and `node.report|connected|
 * disconnected|agent`, each with a JSON body and a stored id. A follower subscribes before it
 * starts an operation (the stream's opening block names the newest id, so nothing after it is
 * missed); when the stream drops (the replica serving it stopped or drains, the connection cut)
 * it reconnects by itself with `Last-Event-ID` (@keelson/protocol/event-stream), for at most
 * `--reconnect-timeout-ms`, and the server replays what was missed: every event once, in order.
 */

export type { StreamEvent };

export interface EventStream {
  /** Calls `handler` for each event until closed; rejects (a CliError) when the stream gave up. */
  events(handler: (event: StreamEvent) => void): Promise<void>;
  /** Where drops and resumes are told (stderr; a live display replaces it to draw below the note). */
  note: (text: string) => void;
  close(): void;
}

/** Asking again may pass: unreachable, or the server's 5xx or 429. Any other refusal stands. */
export function retryable(error: unknown): boolean {
  if (error instanceof ApiRefusal) return error.status >= 500 || error.status === 429;
  return !(error instanceof CliError) || error.exitCode === EXIT.unreachable;
}

/**
 * Opens the stream and returns once the server holds the subscription (its opening block
 * arrived), so nothing that happens after this resolves is missed. Drops and resumes are told
 * on stderr.
 */
export async function openEvents(cli: Cli, s: Session): Promise<EventStream> {
  const pending: StreamEvent[] = [];
  let note = (text: string) => cli.out.note(text);
  let handler: ((event: StreamEvent) => void) | undefined;
  const stream = followResuming({
    connect: async (lastEventId, signal) => {
      const res = await s.api.send("GET", `/v4/${s.projectId}/events`, {
        headers: {
          accept: "text/event-stream",
          ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }),
        },
        signal,
        stream: true,
      });
      return decode(res.body);
    },
    retryable,
    giveUpMs: cli.settings.reconnectTimeoutMs,
    onEvent: (event) => (handler ? handler(event) : pending.push(event)),
    onDrop: (reason, attempt, delayMs) =>
      note(
        `events stream dropped (${reason instanceof Error ? reason.message : String(reason)}); reconnecting in ${(delayMs / 1000).toFixed(1)}s (attempt ${attempt})`,
      ),
    onResume: (lastEventId) =>
      note(`events stream resumed${lastEventId === undefined ? "" : ` after event ${lastEventId}`}`),
  });
  await stream.opened.catch((error: unknown) => {
    throw error instanceof StreamGaveUp ? (error.cause as Error) : error;
  });
  return {
    async events(h) {
      handler = h;
      for (const event of pending.splice(0)) h(event);
      await stream.done.catch((error: unknown) => {
        if (!(error instanceof StreamGaveUp)) throw error;
        const exit = error.cause instanceof CliError ? error.cause.exitCode : EXIT.unreachable;
        throw new CliError(error.message, exit);
      });
    },
    get note() {
      return note;
    },
    set note(to) {
      note = to;
    },
    close: () => stream.close(),
  };
}

async function* decode(body: AsyncIterable<Uint8Array> & { destroy(): void }): AsyncIterable<string> {
  const decoder = new TextDecoder();
  try {
    for await (const chunk of body) yield decoder.decode(chunk, { stream: true });
  } finally {
    body.destroy();
  }
}
