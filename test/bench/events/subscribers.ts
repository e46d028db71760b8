/**
 * Child process of `pnpm bench events`: N clients of GET /v4/{project}/events, each its own
 * HTTP connection, reading the stream as it comes. For each `node.report` a client receives,
 * the delay from the moment the simulated node stamped its phases (the agent's `startedAt` or
 * `finishedAt`, made right before it sent the report) to the moment the client read the event:
 * the report's way through the agent link, the database write and the stream, on the one wall
 * clock of this machine (milliseconds).
 */
import { get, type IncomingMessage } from "node:http";

type Message = { type: "open"; url: string; token: string; count: number } | { type: "collect" } | { type: "close" };

const streams: IncomingMessage[] = [];
let delays: number[] = [];
let events = 0;
let bytes = 0;

// The newest phase time of a node.report's data line, without parsing the whole JSON.
const PHASE_TIME = /"(?:startedAt|finishedAt)":"([^"]+)"/g;

function onBlock(block: string, readAt: number): void {
  if (!block.includes("event: node.report")) {
    if (block.includes("event: ")) events++;
    return;
  }
  events++;
  let newest = 0;
  for (const m of block.matchAll(PHASE_TIME)) newest = Math.max(newest, Date.parse(m[1] as string));
  if (newest > 0) delays.push(readAt - newest);
}

function open(url: string, token: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false, headers: { "x-auth-token": token } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`events stream answered ${res.statusCode}`));
        return;
      }
      streams.push(res);
      let rest = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        const readAt = Date.now();
        bytes += chunk.length;
        rest += chunk;
        let end = rest.indexOf("\n\n");
        while (end >= 0) {
          onBlock(rest.slice(0, end), readAt);
          rest = rest.slice(end + 2);
          end = rest.indexOf("\n\n");
        }
      });
      res.on("error", () => undefined);
      resolve();
    });
    req.on("error", reject);
  });
}

function quantile(sorted: number[], q: number): number | null {
  return sorted.length === 0 ? null : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);
}

process.on("message", async (message: Message) => {
  try {
    if (message.type === "open") {
      for (let i = 0; i < message.count; i += 50)
        await Promise.all(
          Array.from({ length: Math.min(50, message.count - i) }, () => open(message.url, message.token)),
        );
      process.send?.({ type: "opened", streams: streams.length });
    } else if (message.type === "collect") {
      const sorted = delays.sort((a, b) => a - b);
      process.send?.({
        type: "collected",
        reports: sorted.length,
        events,
        bytes,
        p50: quantile(sorted, 0.5),
        p99: quantile(sorted, 0.99),
        max: quantile(sorted, 1),
      });
      delays = [];
      events = 0;
      bytes = 0;
    } else if (message.type === "close") {
      for (const s of streams.splice(0)) s.destroy();
      process.send?.({ type: "closed" });
    }
  } catch (err) {
    process.send?.({ type: "error", error: err instanceof Error ? err.message : String(err) });
  }
});
