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
const BLOCK_END = Buffer.from("\n\n");
const NODE_REPORT = "event: node.report\n";
/**
 * The phase time of each node.report by its event id, found once for all clients: every client
 * gets the same block, so this process reads each report's 3 KB once, not once per client (it
 * shares the machine with the server it measures, and only needs to count and time).
 */
const phaseTimeById = new Map<string, number>();

function phaseTime(block: Buffer, start: number, end: number): number {
  let newest = 0;
  for (const m of block.toString("latin1", start, end).matchAll(PHASE_TIME))
    newest = Math.max(newest, Date.parse(m[1] as string));
  return newest;
}

/** One block (`start` to `end` of `buf`): counted, and a node.report's delay noted. */
function onBlock(buf: Buffer, start: number, end: number, readAt: number): void {
  // An event block opens with `id: <n>\n` (none when the store refused it) and `event: <name>\n`.
  const head = buf.toString("latin1", start, Math.min(end, start + 48));
  const eventAt = head.indexOf("event: ");
  if (eventAt < 0) return;
  events++;
  if (!head.startsWith(NODE_REPORT, eventAt)) return;
  const id = head.startsWith("id: ") ? head.slice(4, head.indexOf("\n")) : undefined;
  let newest = id === undefined ? undefined : phaseTimeById.get(id);
  if (newest === undefined) {
    newest = phaseTime(buf, start, end);
    if (id !== undefined) phaseTimeById.set(id, newest);
  }
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
      // Bytes as they come (no decoding); only a block cut by the chunk's end is kept and joined.
      let rest: Buffer | undefined;
      res.on("data", (chunk: Buffer) => {
        const readAt = Date.now();
        bytes += chunk.length;
        const buf = rest ? Buffer.concat([rest, chunk]) : chunk;
        let start = 0;
        for (let end = buf.indexOf(BLOCK_END, start); end >= 0; end = buf.indexOf(BLOCK_END, start)) {
          onBlock(buf, start, end, readAt);
          start = end + 2;
        }
        rest = start < buf.length ? buf.subarray(start) : undefined;
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
      phaseTimeById.clear();
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
