// `pnpm bench metrics`: `GET /metrics` of a keelson-server holding N simulated agent links
// (BENCH_AGENTS, default 2,000 and 10,000; the simulators run in their own process), on SQLite
// and on PostgreSQL (a server of its own, started for the run) at each size. Measures the scrape
// (BENCH_SCRAPES of them: wall time median and p99, the server's mean CPU, size) beside `GET /readyz`
// on the same server, and the server's CPU over BENCH_WINDOW_S seconds with a scrape every
// BENCH_SCRAPE_EVERY_S seconds (Prometheus' usual 15 s) beside the same window with no scrape.
// Prints figures; never fails on a time.
import { loadavg } from "node:os";
import { startPostgres } from "../../support/postgres.ts";
import { ask } from "../agents/children.ts";
import { cpuSeconds, memoryMiB } from "../agents/proc-stats.ts";
import { startBenchFleet } from "../support/bench-fleet.ts";
import { markdownTable } from "../support/markdown-table.ts";

/** Fleet sizes (comma-separated), each measured on SQLite and on PostgreSQL. */
const AGENTS = (process.env.BENCH_AGENTS ?? "2000,10000").split(",").map(Number);
const SCRAPES = Number(process.env.BENCH_SCRAPES ?? 20);
const WINDOW_S = Number(process.env.BENCH_WINDOW_S ?? 60);
const SCRAPE_EVERY_S = Number(process.env.BENCH_SCRAPE_EVERY_S ?? 15);
const SETTLE_S = 5;
const ADMIN_TOKEN = "bench-admin-token";

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The value at quantile q of the sorted samples (nearest rank). */
function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

interface Request {
  ms: number;
  bytes: number;
  text: string;
}

/** One request with the admin token: its wall time and the body. */
async function timedGet(url: string): Promise<Request> {
  const t0 = performance.now();
  const res = await fetch(url, { headers: { "x-auth-token": ADMIN_TOKEN } });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status}: ${text.slice(0, 200)}`);
  return { ms, bytes: Buffer.byteLength(text), text };
}

interface Row {
  label: string;
  p50Ms: number;
  p99Ms: number;
  /** The server's CPU over the series / SCRAPES: /proc counts in clock ticks (10 ms), too coarse for one request. */
  cpuMeanMs: number;
  bytes: number;
  series: number | undefined;
}

async function series(label: string, url: string, pid: number): Promise<{ row: Row; last: string }> {
  const runs: Request[] = [];
  const cpu0 = cpuSeconds(pid);
  for (let i = 0; i < SCRAPES; i++) runs.push(await timedGet(url));
  const cpuMeanMs = ((cpuSeconds(pid) - cpu0) * 1000) / SCRAPES;
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  const last = (runs.at(-1) as Request).text;
  const isMetrics = url.endsWith("/metrics");
  return {
    row: {
      label,
      p50Ms: quantile(ms, 0.5),
      p99Ms: quantile(ms, 0.99),
      cpuMeanMs,
      bytes: (runs.at(-1) as Request).bytes,
      // Sample lines: every line that is not a # HELP / # TYPE comment.
      series: isMetrics ? last.split("\n").filter((l) => l && !l.startsWith("#")).length : undefined,
    },
    last,
  };
}

/** The server's CPU over the window as % of one core; with `scrapeUrl`, a scrape every SCRAPE_EVERY_S. */
async function cpuWindow(pid: number, scrapeUrl?: string): Promise<{ cpuPercent: number; scrapes: number }> {
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  let scrapes = 0;
  while (performance.now() - t0 < WINDOW_S * 1000) {
    const due = t0 + scrapes * SCRAPE_EVERY_S * 1000;
    if (scrapeUrl && performance.now() >= due) {
      await timedGet(scrapeUrl);
      scrapes++;
    }
    await sleep(Math.min(250, Math.max(0, t0 + WINDOW_S * 1000 - performance.now())));
  }
  const elapsedS = (performance.now() - t0) / 1000;
  return { cpuPercent: ((cpuSeconds(pid) - cpu0) / elapsedS) * 100, scrapes };
}

interface StoreRun {
  store: "sqlite" | "postgres";
  agents: number;
  ready: Row;
  metrics: Row;
  quiet: { cpuPercent: number; scrapes: number };
  scraped: { cpuPercent: number; scrapes: number };
  rss: number;
}

/** One keelson-server on one store with `agents` simulated agent links: the scrape beside /readyz, then the CPU windows. */
async function measure(store: StoreRun["store"], agents: number, env: Record<string, string>): Promise<StoreRun> {
  const fleet = await startBenchFleet({
    name: "metrics",
    simWorker: "test/bench/agents/sim-worker.ts",
    adminToken: ADMIN_TOKEN,
    env,
  });
  const { base, worker, pid, projectId } = fleet;
  try {
    log(`${store}: registering and connecting ${agents} simulated agents...`);
    const started = await ask<{ registerMs: number; connectMs: number; connected: number }>(
      worker,
      { type: "start", url: base, adminToken: ADMIN_TOKEN, projectId, count: agents },
      "started",
    );
    log(`${store}: ${started.connected} connected; settling ${SETTLE_S} s`);
    await sleep(SETTLE_S * 1000);

    // The baseline request first: the same server, auth and HTTP path, no metrics work.
    const ready = await series("GET /readyz (baseline)", `${base}/readyz`, pid);
    const metrics = await series("GET /metrics", `${base}/metrics`, pid);
    // The scrape must be of the fleet under test, or its time says nothing about N agents.
    const links = Number(/^keelson_agent_links_open\{replica="[^"]*"\} (\d+)$/m.exec(metrics.last)?.[1]);
    const hosts = Number(/^keelson_hosts\{agent="connected"\} (\d+)$/m.exec(metrics.last)?.[1]);
    if (links !== agents || hosts !== agents) {
      throw new Error(`the scrape reports ${links} links open and ${hosts} hosts connected, not ${agents}`);
    }
    log(`${store}: scrapes done; CPU windows of ${WINDOW_S} s: no scrape, then a scrape every ${SCRAPE_EVERY_S} s`);
    const quiet = await cpuWindow(pid);
    const scraped = await cpuWindow(pid, `${base}/metrics`);
    return { store, agents, ready: ready.row, metrics: metrics.row, quiet, scraped, rss: memoryMiB(pid).rss };
  } finally {
    await fleet.stop();
  }
}

async function main(): Promise<void> {
  // Both stores at each size, in this one run, so each figure has its baseline beside it.
  const pg = await startPostgres();
  const runs: StoreRun[] = [];
  const loads: string[] = [];
  try {
    for (const agents of AGENTS) {
      runs.push(await measure("sqlite", agents, {}));
      runs.push(await measure("postgres", agents, { KEELSON_DATABASE_URL: await pg.createDatabase() }));
      loads.push(`${agents} agents: ${loadavg()[0]?.toFixed(2)}`);
    }
  } finally {
    await pg.stop();
  }
  const f = (n: number, d = 1) => n.toFixed(d);
  process.stdout.write(
    `\n/metrics benchmark — ${new Date().toISOString()}, node ${process.version}, simulators in a separate process; ` +
      `1-min load average after each size: ${loads.join(", ")}\n\n`,
  );
  process.stdout.write(
    `${markdownTable(
      [
        "store",
        "agents",
        "request",
        `wall p50 ms (of ${SCRAPES})`,
        "wall p99 ms",
        "server CPU ms each (mean)",
        "bytes",
        "samples",
        "server RSS MiB",
      ],
      runs.flatMap((run) =>
        [run.ready, run.metrics].map((r) => [
          run.store,
          String(run.agents),
          r.label,
          f(r.p50Ms),
          f(r.p99Ms),
          f(r.cpuMeanMs),
          String(r.bytes),
          r.series === undefined ? "-" : String(r.series),
          f(run.rss, 0),
        ]),
      ),
    )}\n\n`,
  );
  process.stdout.write(
    `${markdownTable(
      [
        "store",
        "agents",
        `CPU % of 1 core over ${WINDOW_S} s, no scrape (baseline)`,
        `scrape every ${SCRAPE_EVERY_S} s`,
        "scrapes",
        "difference",
      ],
      runs.map((run) => [
        run.store,
        String(run.agents),
        f(run.quiet.cpuPercent, 2),
        f(run.scraped.cpuPercent, 2),
        String(run.scraped.scrapes),
        f(run.scraped.cpuPercent - run.quiet.cpuPercent, 2),
      ]),
    )}\n`,
  );
  const bySize = AGENTS.map((agents) => {
    const [lite, post] = ["sqlite", "postgres"].map(
      (s) => runs.find((r) => r.store === s && r.agents === agents)?.metrics,
    );
    return `${agents} agents: scrape CPU postgres/sqlite ${f((post?.cpuMeanMs ?? Number.NaN) / (lite?.cpuMeanMs ?? Number.NaN), 2)}, p50 ${f((post?.p50Ms ?? Number.NaN) / (lite?.p50Ms ?? Number.NaN), 2)}`;
  });
  process.stdout.write(
    `\n${bySize.join("\n")}\n` +
      `the windows' difference also holds the heartbeat's noise; one scrape's own CPU time (${SCRAPE_EVERY_S} s apart: CPU ms / ${SCRAPE_EVERY_S * 10} points) is the steadier figure.\n` +
      "wall: request sent to body read, from the bench process; server CPU: /proc/<pid>/stat of the server around the whole series, divided by its count.\n",
  );
}

await main();
