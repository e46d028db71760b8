import type { Session } from "./session.ts";

/**
 * The project's events stream (`GET /v4/{project}/events`, server-sent events; see the control
 * plane's routes/events.ts): `operation.started|step|finished` and `node.report|connected|
 * disconnected|agent`, each with a JSON body. There is no replay, so a follower subscribes
 * first and reads current state from the REST resources afterwards.
 */

export interface StreamEvent {
  name: string;
  data: Record<string, unknown>;
}

export interface EventStream {
  /** Calls `handler` for each event until closed; resolves when the stream ends. */
  events(handler: (event: StreamEvent) => void): Promise<void>;
  close(): void;
}

/**
 * Opens the stream and returns once the server holds the subscription (its first comment line
 * arrived), so nothing that happens after this resolves is missed.
 */
export async function openEvents(s: Session): Promise<EventStream> {
  const abort = new AbortController();
  const res = await s.api.send("GET", `/v4/${s.projectId}/events`, {
    headers: { accept: "text/event-stream" },
    signal: abort.signal,
    stream: true,
  });
  const reader = res.body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let buffer = "";
  const pending: StreamEvent[] = [];
  let handler: ((event: StreamEvent) => void) | undefined;

  const take = (chunk: Uint8Array) => {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseBlock(block);
      if (!event) continue;
      if (handler) handler(event);
      else pending.push(event);
    }
  };
  const first = await reader.next().catch(() => ({ done: true as const, value: undefined }));
  if (!first.done && first.value) take(first.value);

  return {
    async events(h) {
      handler = h;
      for (const event of pending.splice(0)) h(event);
      if (first.done) return;
      try {
        for (;;) {
          const { done, value } = await reader.next();
          if (done) return;
          take(value);
        }
      } catch {
        // closed by us, or the connection dropped: the follower falls back to polling
      }
    },
    close() {
      abort.abort();
      res.body.destroy();
    },
  };
}

function parseBlock(block: string): StreamEvent | undefined {
  let name = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return undefined;
  try {
    return { name, data: JSON.parse(data.join("\n")) as Record<string, unknown> };
  } catch {
    return undefined;
  }
}
