import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask, spawnNode, stopChild, waitMessage } from "./children.ts";
import { memoryMiB, sampleWindow } from "./proc-stats.ts";

const SIZES = (process.env.BENCH_SIZES ?? "1000,5000,10000").split(",").map(Number);
const WINDOW_S = Number(process.env.BENCH_WINDOW_S ?? 30);
const HEARTBEAT_MS = Number(process.env.BENCH_HEARTBEAT_MS ?? 5000);
const SETTLE_S = 5;
const ADMIN_TOKEN = "bench-admin-token";

interface PingReport {
  hosts: number;
  ok: number;
  failed: number;
  totalMs: number;
  latencyMs: { min: number; p50: number; p95: number; p99: number; max: number } | null;
}

interface Row {
  agents: number;
  server: "keelson" | "bare ws";
  registerS: number | undefined;
  connectS: number;
  idleRssMiB: number;
  rssMiB: number;
  rssMaxMiB: number;
  cpuPercent: number;
  ping: PingReport;
  pingWarm: PingReport;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

async function runKeelson(count: number): Promise<Row> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "keelson-bench-"));
  const url = `http://127.0.0.1:${port}`;
  const server = spawnNode(
    ["packages/control-plane/bin/keelson-server.mjs"],
    {
      KEELSON_LISTEN: `127.0.0.1:${port}`,
      KEELSON_DATA_DIR: dataDir,
      KEELSON_ADMIN_TOKEN: ADMIN_TOKEN,
      KEELSON_LOG_LEVEL: "warn",
      KEELSON_AGENT_HEARTBEAT_MS: String(HEARTBEAT_MS),
      // Measured as in production: no check of outgoing link frames (see packages/protocol).
      NODE_ENV: "production",
    },
    { quiet: true },
  );
  const worker = spawnNode(["--import", "tsx", "test/bench/agents/sim-worker.ts"], {}, { ipc: true });
  try {
    await waitReady(url);
    const pid = server.pid as number;
    const idleRssMiB = memoryMiB(pid).rss;
    const projects = (await (
      await fetch(`${url}/v1/projects`, { headers: { "x-auth-token": ADMIN_TOKEN } })
    ).json()) as {
      projects: { id: string; name: string }[];
    };
    const projectId = projects.projects.find((p) => p.name === "default")?.id as string;
    log(`keelson ${count}: registering and connecting...`);
    const started = await ask<{ registerMs: number; connectMs: number; connected: number }>(
      worker,
      { type: "start", url, adminToken: ADMIN_TOKEN, projectId, count },
      "started",
    );
    log(`keelson ${count}: ${started.connected} connected; settling ${SETTLE_S} s, then measuring ${WINDOW_S} s`);
    await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
    const window = await sampleWindow(pid, WINDOW_S);
    const ping = await pingAll(url);
    const pingWarm = await pingAll(url);
    return {
      agents: count,
      server: "keelson",
      registerS: started.registerMs / 1000,
      connectS: started.connectMs / 1000,
      idleRssMiB,
      ...window,
      ping,
      pingWarm,
    };
  } finally {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(worker);
    await stopChild(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function pingAll(url: string): Promise<PingReport> {
  const res = await fetch(`${url}/v1/agents/ping`, {
    method: "POST",
    headers: { "x-auth-token": ADMIN_TOKEN, "content-type": "application/json" },
    body: JSON.stringify({ timeoutMs: 60_000 }),
  });
  if (!res.ok) throw new Error(`ping-all answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as PingReport;
}

async function runBaseline(count: number): Promise<Row> {
  const port = await freePort();
  const server = spawnNode(
    ["--import", "tsx", "test/bench/agents/baseline-server.ts"],
    { PORT: String(port), HEARTBEAT_MS: String(HEARTBEAT_MS) },
    { ipc: true },
  );
  const worker = spawnNode(["--import", "tsx", "test/bench/agents/sim-worker.ts"], {}, { ipc: true });
  try {
    await waitMessage(server, "listening");
    const pid = server.pid as number;
    const idleRssMiB = memoryMiB(pid).rss;
    log(`bare ws ${count}: connecting...`);
    const started = await ask<{ connectMs: number; connected: number }>(
      worker,
      { type: "start", url: `http://127.0.0.1:${port}`, linkUrl: `ws://127.0.0.1:${port}/`, count, bare: true },
      "started",
    );
    log(`bare ws ${count}: ${started.connected} connected; settling ${SETTLE_S} s, then measuring ${WINDOW_S} s`);
    await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
    const window = await sampleWindow(pid, WINDOW_S);
    const ping = (await ask<{ report: PingReport }>(server, { type: "ping", timeoutMs: 60_000 }, "pinged")).report;
    const pingWarm = (await ask<{ report: PingReport }>(server, { type: "ping", timeoutMs: 60_000 }, "pinged")).report;
    return {
      agents: count,
      server: "bare ws",
      registerS: undefined,
      connectS: started.connectMs / 1000,
      idleRssMiB,
      ...window,
      ping,
      pingWarm,
    };
  } finally {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(worker);
    await ask(server, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(server);
  }
}

function table(rows: Row[]): string {
  const head = [
    "agents",
    "server",
    "register s",
    "connect s",
    "RSS idle MiB",
    "RSS MiB (max)",
    "CPU % of 1 core",
    "ping all: ok/hosts",
    "total ms",
    "p50 ms",
    "p99 ms",
    "warm total ms",
  ];
  const fmt = (n: number | undefined, digits = 1) => (n === undefined ? "-" : n.toFixed(digits));
  const lines = rows.map((r) => [
    String(r.agents),
    r.server,
    fmt(r.registerS),
    fmt(r.connectS, 2),
    fmt(r.idleRssMiB, 0),
    `${fmt(r.rssMiB, 0)} (${fmt(r.rssMaxMiB, 0)})`,
    fmt(r.cpuPercent, 2),
    `${r.ping.ok}/${r.ping.hosts}`,
    fmt(r.ping.totalMs, 0),
    fmt(r.ping.latencyMs?.p50, 0),
    fmt(r.ping.latencyMs?.p99, 0),
    fmt(r.pingWarm.totalMs, 0),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const row = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(" | ")} |`;
  return [row(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...lines.map(row)].join("\n");
}

const rows: Row[] = [];
for (const count of SIZES) {
  rows.push(await runKeelson(count));
  rows.push(await runBaseline(count));
  log(`done ${count}`);
}
process.stdout.write(
  `\nAgent link benchmark — ${new Date().toISOString()}, node ${process.version}, ` +
    `heartbeat ${HEARTBEAT_MS} ms, steady window ${WINDOW_S} s after ${SETTLE_S} s settle, simulators in a separate process\n\n`,
);
process.stdout.write(`${table(rows)}\n`);
process.stdout.write(
  "\nregister: join token minted + POST /v1/agents/register per agent (50 in flight); connect: first attempt to last welcome (500 in flight);\n" +
    "CPU/RSS: the server process alone, from /proc/<pid>/stat and /proc/<pid>/status; ping all: POST /v1/agents/ping (every agent at once).\n",
);
