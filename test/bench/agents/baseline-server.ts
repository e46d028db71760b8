/**
 * The benchmark's baseline: a bare `ws` server on the same machine holding the same number of
 * connections with the same heartbeat (ping every interval, terminate after two missed pongs)
 * and the same command round trip, but no authentication, validation, database or logging.
 * The difference to keelson-server is the price of those.
 */
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
// ws directly: the bare server loads nothing else (run.ts bundles it into one file).
import { type WebSocket, WebSocketServer } from "ws";

const port = Number(process.env.PORT);
const heartbeatMs = Number(process.env.HEARTBEAT_MS ?? 15_000);

const server = createServer();
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
const sockets = new Map<WebSocket, { missed: number }>();
const pending = new Map<string, (ok: boolean) => void>();

server.on("upgrade", (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    const state = { missed: 0 };
    sockets.set(ws, state);
    ws.on("pong", () => {
      state.missed = 0;
    });
    ws.on("message", (data) => {
      const frame = JSON.parse(String(data)) as { type: string; id?: string; ok?: boolean; hostId?: string };
      if (frame.type === "hello") {
        ws.send(
          JSON.stringify({ type: "welcome", protocolVersion: 1, hostId: frame.hostId, projectId: "bare", heartbeatMs }),
        );
      } else if (frame.type === "result" && frame.id) {
        pending.get(frame.id)?.(frame.ok === true);
        pending.delete(frame.id);
      }
    });
    ws.on("close", () => sockets.delete(ws));
  });
});

setInterval(() => {
  for (const [ws, state] of sockets) {
    if (state.missed >= 2) {
      ws.terminate();
      continue;
    }
    state.missed++;
    ws.ping();
  }
}, heartbeatMs).unref();

async function pingAll(timeoutMs: number) {
  const started = performance.now();
  const latencies: number[] = [];
  let failed = 0;
  await Promise.all(
    [...sockets.keys()].map(
      (ws) =>
        new Promise<void>((resolve) => {
          const id = randomUUID();
          const t0 = performance.now();
          const timer = setTimeout(() => {
            pending.delete(id);
            failed++;
            resolve();
          }, timeoutMs);
          pending.set(id, (ok) => {
            clearTimeout(timer);
            if (ok) latencies.push(performance.now() - t0);
            else failed++;
            resolve();
          });
          ws.send(JSON.stringify({ type: "command", id, name: "ping", payload: {}, timeoutMs }));
        }),
    ),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round((latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0) * 10) / 10;
  return {
    hosts: sockets.size,
    ok: latencies.length,
    failed,
    totalMs: Math.round((performance.now() - started) * 10) / 10,
    latencyMs: { min: at(0), p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1) },
  };
}

process.on("message", async (message: { type: string; timeoutMs?: number }) => {
  if (message.type === "ping") process.send?.({ type: "pinged", report: await pingAll(message.timeoutMs ?? 60_000) });
  if (message.type === "stop") {
    for (const ws of sockets.keys()) ws.close(1001, "baseline stopping");
    server.close();
    process.send?.({ type: "stopped" });
    process.disconnect();
    setTimeout(() => process.exit(0), 500).unref();
  }
});

// A plain exit on SIGTERM, so a --cpu-prof run (BENCH_PROFILE_DIR) writes its profile.
process.on("SIGTERM", () => process.exit(0));

server.listen(port, "127.0.0.1", () => process.send?.({ type: "listening" }));
