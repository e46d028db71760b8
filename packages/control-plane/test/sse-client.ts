import { get, type IncomingMessage } from "node:http";
import type { OperationEvent } from "../src/runner/types.ts";

export interface SseEvent {
  /** The `id:` line, when the event had one. */
  id?: number;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Reads a text/event-stream over real HTTP (node:http without keep-alive, so the server can
 * close at once after the test), collecting events as they arrive; `headers` are sent as given
 * (a Last-Event-ID, say).
 */
export async function openStream(url: string, token: string | null, headers: Record<string, string> = {}) {
  const res = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = get(
      url,
      { agent: false, headers: { ...(token ? { "x-auth-token": token } : {}), ...headers } },
      resolve,
    );
    req.on("error", reject);
  });
  const events: SseEvent[] = [];
  let raw = "";
  let all = "";
  res.setEncoding("utf8");
  res.on("data", (chunk: string) => {
    raw += chunk;
    all += chunk;
    let end = raw.indexOf("\n\n");
    while (end >= 0) {
      const block = raw.slice(0, end);
      raw = raw.slice(end + 2);
      const fields = Object.fromEntries(
        block
          .split("\n")
          .filter((l) => !l.startsWith(":"))
          .map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]),
      );
      if (fields.event) {
        events.push({
          ...(fields.id === undefined ? {} : { id: Number(fields.id) }),
          event: fields.event,
          data: JSON.parse(fields.data ?? "null"),
        });
      }
      end = raw.indexOf("\n\n");
    }
  });
  res.on("error", () => undefined);
  return {
    status: res.statusCode,
    contentType: res.headers["content-type"],
    events,
    body: () => all,
    close: () => res.destroy(),
  };
}

/** The `n`th running step of a restart of one cluster, as the runner emits it: what the stream tests send. */
export function restartStep(projectId: string, n: number, extra: Partial<OperationEvent> = {}): OperationEvent {
  return {
    type: "operation.step",
    operationId: `op-${n}`,
    projectId,
    kind: "cluster.restart",
    targetId: "cluster",
    state: "running",
    step: "batch",
    ...extra,
  } as OperationEvent;
}
