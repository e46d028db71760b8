import type { Session } from "./session.ts";

/** One server-sent event of `GET /v4/{project}/events` (README "Live progress"). */
export interface LiveEvent {
  name: string;
  data: Record<string, unknown>;
}

/**
 * Follows the project's event stream. EventSource cannot send X-Auth-Token, so this reads the
 * stream with fetch and parses the `event:`/`data:` lines itself. Reconnects after a drop (the
 * stream has no replay, so `onReconnect` lets the page read the resources again). Returns a stop.
 */
export function followEvents(
  session: Session,
  onEvent: (event: LiveEvent) => void,
  onReconnect: () => void = () => {},
): () => void {
  const abort = new AbortController();
  let stopped = false;
  const run = async (first: boolean) => {
    if (!first) onReconnect();
    const res = await fetch(`/v4/${session.projectId}/events`, {
      headers: { "x-auth-token": session.token },
      signal: abort.signal,
    });
    if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
        let name = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) name = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data) onEvent({ name, data: JSON.parse(data) as Record<string, unknown> });
      }
    }
  };
  const loop = async () => {
    let first = true;
    while (!stopped) {
      await run(first).catch(() => {});
      first = false;
      if (!stopped) await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void loop();
  return () => {
    stopped = true;
    abort.abort();
  };
}
