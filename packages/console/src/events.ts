import { followResuming, type StreamEvent } from "@keelson/protocol/event-stream";

/** One server-sent event of `GET /v4/{project}/events` (README "Live progress"), with its stored id. */
export type LiveEvent = StreamEvent;

/** What the stream needs of the login session (structural: this module also runs under Node in its test). */
export interface StreamSession {
  projectId: string;
  token: string;
}

export interface FollowOptions {
  /** Told once, when the stream stopped reconnecting (the server refused it, or it stayed down). */
  onGiveUp?: (error: Error) => void;
  /** How long the stream may stay down before giving up. Default 2 minutes. */
  giveUpMs?: number;
  /** The control plane's address; default the page's own origin (the test gives the server's). */
  base?: string;
}

/** An answer of the stream other than 200: refused for good, unless 5xx or 429. */
class StreamAnswer extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Follows the project's event stream. EventSource cannot send X-Auth-Token, so this reads the
 * stream with fetch (@keelson/protocol/event-stream parses it and reconnects after a drop, with
 * `Last-Event-ID`: the server replays what was missed, every event once and in order).
 * `onReconnect` is called when events may have been missed after all (the server no longer held
 * them: `events.lost`), so the page reads its resources again. Returns a stop.
 */
export function followEvents(
  session: StreamSession,
  onEvent: (event: LiveEvent) => void,
  onReconnect: () => void = () => {},
  options: FollowOptions = {},
): () => void {
  const stream = followResuming({
    connect: async (lastEventId, signal) => {
      const res = await fetch(`${options.base ?? ""}/v4/${session.projectId}/events`, {
        headers: {
          "x-auth-token": session.token,
          accept: "text/event-stream",
          ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }),
        },
        signal,
      });
      if (!res.ok || !res.body) throw new StreamAnswer(res.status, await refusal(res));
      return text(res.body);
    },
    retryable: (error) => !(error instanceof StreamAnswer) || error.status >= 500 || error.status === 429,
    retryOpen: true,
    giveUpMs: options.giveUpMs ?? 120_000,
    onEvent: (event) => (event.name === "events.lost" ? onReconnect() : onEvent(event)),
    onResume: (lastEventId) => {
      if (lastEventId === undefined) onReconnect();
    },
  });
  stream.done.catch((error: unknown) => options.onGiveUp?.(error as Error));
  return () => stream.close();
}

/** The API's `{code, message, field}` of a refused stream, in a sentence. */
async function refusal(res: Response): Promise<string> {
  const body = (await res.json().catch(() => ({}))) as { code?: unknown; message?: unknown; field?: unknown };
  const field = typeof body.field === "string" ? ` (field ${body.field})` : "";
  const code = typeof body.code === "string" ? ` ${body.code}` : "";
  return `HTTP ${res.status}${code}: ${typeof body.message === "string" ? body.message : res.statusText}${field}`;
}

async function* text(body: ReadableStream<Uint8Array>): AsyncIterable<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield decoder.decode(value, { stream: true });
    }
  } finally {
    // Closed by the follower, or the page left: the connection goes with it.
    await reader.cancel().catch(() => undefined);
  }
}
