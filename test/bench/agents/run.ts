// `pnpm bench agents`: N simulated agents linked to keelson-server over plain HTTP and over TLS
// (KEELSON_TLS=auto, the fleet pinned by KEELSON_CA_HASH) side by side in one run, against a bare
// `ws` server (the baseline): the server's RSS and CPU holding the links at a 5 s heartbeat, a
// command to every agent, and a reconnect storm (every link dropped at once; time until all N
// are linked again, and the server's CPU for it). BENCH_SIZES=1000 for a quick run;
// BENCH_SERVERS=http,bare for some of the three servers (and `before`: the previous revision, BENCH_PREVIOUS=<git rev>
// or the newest tag, checked out beside this tree); BENCH_PROFILE_DIR=<dir> writes each
// server's CPU profile (--cpu-prof) and a heap snapshot at the end of its steady window, with the
// window's bounds for `node --import tsx test/bench/support/cpu-profile-top.ts`. Prints figures;
// never fails on a time.
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { ControlPlaneTrust, caCertHash } from "../../sim/deps.ts";
import { markdownTable } from "../support/markdown-table.ts";
import { checkoutRevision, previousRevisionSetting, type RevisionTree } from "../support/previous-revision.ts";
import { ask, REPO_ROOT, spawnNode, stopChild, waitMessage } from "./children.ts";
import { cpuSeconds, memoryMiB, sampleWindow } from "./proc-stats.ts";

const SIZES = (process.env.BENCH_SIZES ?? "1000,5000,10000").split(",").map(Number);
const WINDOW_S = Number(process.env.BENCH_WINDOW_S ?? 30);
const HEARTBEAT_MS = Number(process.env.BENCH_HEARTBEAT_MS ?? 5000);
const SETTLE_S = 5;
const STORM_TIMEOUT_MS = Number(process.env.BENCH_STORM_TIMEOUT_S ?? 300) * 1000;
const ADMIN_TOKEN = "bench-admin-token";
const SERVERS = (process.env.BENCH_SERVERS ?? "http,https,bare").split(",");
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;

/**
 * Node flags of a server under study: its CPU profile at exit (CPU.<date>.<pid>.<thread>…; the
 * server's main thread is the largest file of its pid, tsx's loader thread another), a heap
 * snapshot on SIGWINCH (SIGUSR2 would stop keelson-server: close-with-grace ends on it).
 */
function profileFlags(): string[] {
  if (!PROFILE_DIR) return [];
  return [
    "--cpu-prof",
    `--cpu-prof-dir=${PROFILE_DIR}`,
    `--diagnostic-dir=${PROFILE_DIR}`,
    "--heapsnapshot-signal=SIGWINCH",
  ];
}

/** Waits until the server's heap snapshot file stops growing, then lets it settle (it blocks the server). */
async function heapSnapshotWritten(dir: string, pid: number): Promise<void> {
  let last = -1;
  for (let i = 0; i < 600; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const file = readdirSync(dir).find((f) => f.endsWith(".heapsnapshot") && f.includes(`.${pid}.`));
    const size = file ? statSync(join(dir, file)).size : -1;
    if (size > 0 && size === last) break;
    last = size;
  }
  await new Promise((r) => setTimeout(r, 5000));
}

/**
 * The steady window in the profile's clock (monotonic µs, as V8 stamps its samples), and a heap
 * snapshot of the server taken right after it.
 */
async function profiledWindow(pid: number, label: string, count: number): Promise<ReturnType<typeof sampleWindow>> {
  const startUs = Number(process.hrtime.bigint() / 1000n);
  const window = await sampleWindow(pid, WINDOW_S);
  if (PROFILE_DIR) {
    const endUs = Number(process.hrtime.bigint() / 1000n);
    log(`${label} ${count}: pid ${pid}, profile window ${startUs} ${endUs} (µs); heap snapshot requested`);
    process.kill(pid, "SIGWINCH");
    await heapSnapshotWritten(PROFILE_DIR, pid);
  }
  return window;
}

interface PingReport {
  hosts: number;
  ok: number;
  failed: number;
  totalMs: number;
  latencyMs: { min: number; p50: number; p95: number; p99: number; max: number } | null;
}

type ServerKind = "keelson http" | "keelson https" | "keelson http (before)" | "bare ws";

interface Storm {
  /** Undefined: not every agent was linked again within the storm's timeout (see `failure`). */
  seconds: number | undefined;
  failure?: string;
  /** The server's CPU time (user + system) from the drop until every agent was linked again. */
  serverCpuS: number;
  /**
   * The simulators' CPU time meanwhile: the agents' side of N handshakes in one process (spread
   * over N hosts in a real fleet). Near one core's worth of the storm time, the fleet is the bottleneck.
   */
  simCpuS: number;
}

interface Row {
  agents: number;
  server: ServerKind;
  registerS: number | undefined;
  connectS: number;
  idleRssMiB: number;
  rssMiB: number;
  rssMaxMiB: number;
  cpuPercent: number;
  ping: PingReport;
  pingWarm: PingReport;
  storm: Storm;
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

async function waitReady(url: string, doFetch: () => typeof fetch, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await doFetch()(`${url}/readyz`)).ok) return;
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

/** Drops every link at once in the worker and times the way back; the server's CPU beside it. */
async function reconnectStorm(worker: ChildProcess, serverPid: number, count: number, tls: boolean): Promise<Storm> {
  const cpu0 = cpuSeconds(serverPid);
  const simCpu0 = cpuSeconds(worker.pid as number);
  const cpus = () => ({
    serverCpuS: cpuSeconds(serverPid) - cpu0,
    simCpuS: cpuSeconds(worker.pid as number) - simCpu0,
  });
  let stormed: { ms: number; connected: number; tls: number };
  try {
    stormed = await ask(worker, { type: "storm", timeoutMs: STORM_TIMEOUT_MS }, "stormed");
  } catch (err) {
    // A storm that does not settle is a figure too (the row says so); the run goes on.
    const failure = (err as Error).message;
    log(failure);
    return { seconds: undefined, failure, ...cpus() };
  }
  if (tls && stormed.tls !== count) throw new Error(`after the storm ${stormed.tls}/${count} links are TLS`);
  return {
    seconds: stormed.ms / 1000,
    ...cpus(),
  };
}

/**
 * `root`: the checkout whose keelson-server runs (BENCH_PREVIOUS: an older commit's worktree,
 * measured in the same run as this one's for a before/after).
 */
async function runKeelson(count: number, tls: boolean, root = REPO_ROOT): Promise<Row> {
  const label: ServerKind = root !== REPO_ROOT ? "keelson http (before)" : tls ? "keelson https" : "keelson http";
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "keelson-bench-"));
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const server = spawnNode(
    [...profileFlags(), join(root, "packages/control-plane/bin/keelson-server.mjs")],
    {
      KEELSON_LISTEN: `127.0.0.1:${port}`,
      KEELSON_DATA_DIR: dataDir,
      KEELSON_ADMIN_TOKEN: ADMIN_TOKEN,
      KEELSON_LOG_LEVEL: "warn",
      KEELSON_AGENT_HEARTBEAT_MS: String(HEARTBEAT_MS),
      // On loopback `off` is the default; the https rows ask for TLS as a non-loopback listener gets it.
      KEELSON_TLS: tls ? "auto" : "off",
      // Measured as in production: no check of outgoing link frames (see packages/protocol).
      NODE_ENV: "production",
    },
    { quiet: true },
  );
  const worker = spawnNode(["--import", "tsx", "test/bench/agents/sim-worker.ts"], {}, { ipc: true });
  const caFile = join(dataDir, "tls", "ca.crt");
  // The bench's own requests trust the server's CA alone, like the fleet (the file exists once TLS is up).
  const doFetch = () => (tls ? new ControlPlaneTrust(readFileSync(caFile, "utf8")).fetch : fetch);
  try {
    await waitReady(url, doFetch);
    const pid = server.pid as number;
    const idleRssMiB = memoryMiB(pid).rss;
    const projects = (await (
      await doFetch()(`${url}/v1/projects`, { headers: { "x-auth-token": ADMIN_TOKEN } })
    ).json()) as {
      projects: { id: string; name: string }[];
    };
    const projectId = projects.projects.find((p) => p.name === "default")?.id as string;
    const caHash = tls ? caCertHash(readFileSync(caFile, "utf8")) : undefined;
    log(`${label} ${count}: registering and connecting...`);
    const started = await ask<{ registerMs: number; connectMs: number; connected: number; tls: number }>(
      worker,
      { type: "start", url, adminToken: ADMIN_TOKEN, projectId, count, ...(caHash ? { caHash } : {}) },
      "started",
    );
    // The TLS rows must be TLS links, verified against the pinned CA, every one of them.
    if (started.tls !== (tls ? count : 0)) throw new Error(`${label}: ${started.tls}/${count} links are TLS`);
    log(`${label} ${count}: ${started.connected} connected; settling ${SETTLE_S} s, then measuring ${WINDOW_S} s`);
    await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
    const window = await profiledWindow(pid, label, count);
    const ping = await pingAll(url, doFetch());
    const pingWarm = await pingAll(url, doFetch());
    log(`${label} ${count}: reconnect storm`);
    const storm = await reconnectStorm(worker, pid, count, tls);
    return {
      agents: count,
      server: label,
      registerS: started.registerMs / 1000,
      connectS: started.connectMs / 1000,
      idleRssMiB,
      ...window,
      ping,
      pingWarm,
      storm,
    };
  } finally {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(worker);
    await stopChild(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function pingAll(url: string, doFetch: typeof fetch): Promise<PingReport> {
  const res = await doFetch(`${url}/v1/agents/ping`, {
    method: "POST",
    headers: { "x-auth-token": ADMIN_TOKEN, "content-type": "application/json" },
    body: JSON.stringify({ timeoutMs: 60_000 }),
  });
  if (!res.ok) throw new Error(`ping-all answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as PingReport;
}

/**
 * The bare server as one plain JavaScript file (esbuild, `ws` inside it), built once per run:
 * keelson-server runs its bundle, not its sources through tsx (packages/control-plane/bin/bundle.mjs),
 * and the baseline must carry neither tsx's loader nor modules it does not use: run through tsx
 * with the simulator's dependency module it took 139 MiB idle instead of 46.
 */
let baselineFile: string | undefined;
async function baselineServer(): Promise<string> {
  if (baselineFile) return baselineFile;
  const dir = mkdtempSync(join(tmpdir(), "keelson-bench-bare-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, "baseline-server.mjs");
  await build({
    entryPoints: [join(REPO_ROOT, "test/bench/agents/baseline-server.ts")],
    outfile: out,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // ws is CommonJS and its optional native helpers stay optional.
    external: ["bufferutil", "utf-8-validate"],
    banner: { js: 'import { createRequire } from "node:module";\nconst require = createRequire(import.meta.url);' },
    logLevel: "error",
  });
  baselineFile = out;
  return out;
}

async function runBaseline(count: number): Promise<Row> {
  const port = await freePort();
  const server = spawnNode(
    [...profileFlags(), await baselineServer()],
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
    const window = await profiledWindow(pid, "bare ws", count);
    const ping = (await ask<{ report: PingReport }>(server, { type: "ping", timeoutMs: 60_000 }, "pinged")).report;
    const pingWarm = (await ask<{ report: PingReport }>(server, { type: "ping", timeoutMs: 60_000 }, "pinged")).report;
    log(`bare ws ${count}: reconnect storm`);
    const storm = await reconnectStorm(worker, pid, count, false);
    return {
      agents: count,
      server: "bare ws",
      registerS: undefined,
      connectS: started.connectMs / 1000,
      idleRssMiB,
      ...window,
      ping,
      pingWarm,
      storm,
    };
  } finally {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(worker);
    await ask(server, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(server);
  }
}

/** The server's memory per link held: RSS while holding them less RSS before the first registration. */
function perAgentKiB(r: Row): number {
  return ((r.rssMiB - r.idleRssMiB) * 1024) / r.agents;
}

function stormS(r: Row): string {
  return r.storm.seconds === undefined ? `> ${STORM_TIMEOUT_MS / 1000}` : r.storm.seconds.toFixed(2);
}

/** What TLS costs at each size: the https row beside the http row of the same run. */
function tlsCost(rows: Row[]): string[] {
  const lines: string[] = [];
  for (const count of SIZES) {
    const plain = rows.find((r) => r.agents === count && r.server === "keelson http");
    const tls = rows.find((r) => r.agents === count && r.server === "keelson https");
    if (!plain || !tls) continue;
    const pct = (a: number, b: number) => `${a >= b ? "+" : ""}${(((a - b) / b) * 100).toFixed(0)}%`;
    lines.push(
      `${count} agents, https vs http: RSS/agent ${perAgentKiB(tls).toFixed(1)} vs ${perAgentKiB(plain).toFixed(1)} KiB ` +
        `(${pct(perAgentKiB(tls), perAgentKiB(plain))}); CPU at the heartbeat ${tls.cpuPercent.toFixed(2)}% vs ${plain.cpuPercent.toFixed(2)}%; ` +
        `storm ${stormS(tls)} vs ${stormS(plain)} s${tls.storm.seconds && plain.storm.seconds ? ` (${pct(tls.storm.seconds, plain.storm.seconds)})` : ""}, ` +
        `server CPU ${tls.storm.serverCpuS.toFixed(2)} vs ${plain.storm.serverCpuS.toFixed(2)} s ` +
        `(${(((tls.storm.serverCpuS - plain.storm.serverCpuS) * 1e6) / count).toFixed(0)} µs more per reconnect), ` +
        `simulators' CPU ${tls.storm.simCpuS.toFixed(2)} vs ${plain.storm.simCpuS.toFixed(2)} s; ` +
        `ping all p99 ${tls.ping.latencyMs?.p99 ?? "-"} vs ${plain.ping.latencyMs?.p99 ?? "-"} ms`,
    );
  }
  for (const r of rows) if (r.storm.failure) lines.push(`${r.agents} agents, ${r.server}: ${r.storm.failure}`);
  return lines;
}

function table(rows: Row[]): string {
  const head = [
    "agents",
    "server",
    "register s",
    "connect s",
    "RSS idle MiB",
    "RSS MiB (max)",
    "RSS/agent KiB",
    "CPU % of 1 core",
    "ping all: ok/hosts",
    "total ms",
    "p50 ms",
    "p99 ms",
    "warm total ms",
    "storm s",
    "storm CPU s",
    "storm sim CPU s",
  ];
  const fmt = (n: number | undefined, digits = 1) => (n === undefined ? "-" : n.toFixed(digits));
  const lines = rows.map((r) => [
    String(r.agents),
    r.server,
    fmt(r.registerS),
    fmt(r.connectS, 2),
    fmt(r.idleRssMiB, 0),
    `${fmt(r.rssMiB, 0)} (${fmt(r.rssMaxMiB, 0)})`,
    fmt(perAgentKiB(r), 1),
    fmt(r.cpuPercent, 2),
    `${r.ping.ok}/${r.ping.hosts}`,
    fmt(r.ping.totalMs, 0),
    fmt(r.ping.latencyMs?.p50, 0),
    fmt(r.ping.latencyMs?.p99, 0),
    fmt(r.pingWarm.totalMs, 0),
    r.storm.seconds === undefined ? `> ${STORM_TIMEOUT_MS / 1000}` : fmt(r.storm.seconds, 2),
    fmt(r.storm.serverCpuS, 2),
    fmt(r.storm.simCpuS, 2),
  ]);
  return markdownTable(head, lines);
}

/** `before` in BENCH_SERVERS: the previous revision checked out first (a bad one fails before the long part). */
function previousTree(): RevisionTree | undefined {
  if (!SERVERS.includes("before")) return undefined;
  const previous = previousRevisionSetting();
  if ("reason" in previous) throw new Error(`BENCH_SERVERS=before: ${previous.reason}`);
  return checkoutRevision(previous.rev, log);
}

const rows: Row[] = [];
const before = previousTree();
try {
  for (const count of SIZES) {
    const runs = {
      http: () => runKeelson(count, false),
      https: () => runKeelson(count, true),
      bare: () => runBaseline(count),
      ...(before && { before: () => runKeelson(count, false, before.root) }),
    } as Record<string, () => Promise<Row>>;
    for (const name of SERVERS) {
      const run = runs[name];
      if (!run) throw new Error(`BENCH_SERVERS: unknown server ${name} (http, https, bare, before)`);
      const row = await run();
      rows.push(row);
      // Each row as it lands: a long run that fails later still leaves its figures.
      log(`row ${JSON.stringify(row)}`);
    }
    log(`done ${count}`);
  }
} finally {
  before?.remove();
}
process.stdout.write(
  `\nAgent link benchmark — ${new Date().toISOString()}, node ${process.version}, ` +
    `heartbeat ${HEARTBEAT_MS} ms, steady window ${WINDOW_S} s after ${SETTLE_S} s settle, simulators in a separate process\n\n`,
);
process.stdout.write(`${table(rows)}\n`);
process.stdout.write(
  "\nregister: join token minted + POST /v1/agents/register per agent (50 in flight); connect: first attempt to last welcome (500 in flight);\n" +
    "CPU/RSS: the server process alone, from /proc/<pid>/stat and /proc/<pid>/status; RSS/agent: (RSS - RSS idle) / agents;\n" +
    "ping all: POST /v1/agents/ping (every agent at once); storm: every link dropped at once (no close frame), time until all are\n" +
    "welcomed again (each agent on its own backoff, 100-200 ms first), the server's and the simulators' CPU time meanwhile.\n" +
    "https: KEELSON_TLS=auto (ECDSA P-256), the fleet pinned by KEELSON_CA_HASH and verifying every link (one shared TLS context).\n\n" +
    `${tlsCost(rows).join("\n")}\n`,
);
