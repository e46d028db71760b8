import { startPostgres } from "../../support/postgres.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";
import { ask, spawnNode, stopChild, waitMessage } from "../agents/children.ts";
import { cpuSeconds, memoryMiB, treeCpuSeconds } from "../agents/proc-stats.ts";
import { apiAs, freePort } from "../support/admin-api.ts";
import { awaitOperation, buildBenchCluster, latestOperation, POLL_MS, serverMs } from "../support/bench-cluster.ts";
import { linkAgents, startBenchFleet } from "../support/bench-fleet.ts";
import { type LoadResult, load } from "../support/measure.ts";
import { median } from "../support/median.ts";
import { SETTINGS, type StatementStats, statementStats } from "../support/pg-statements.ts";

const WORKERS = Number(process.env.BENCH_WORKERS ?? 1000);
const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 1000);
const PERCENT = Number(process.env.BENCH_PERCENT ?? 10);
/**
 * Restarts per store. One rollout's server CPU is 600-800 ms, read from /proc in 10 ms ticks,
 * and a single run of each store varied by ±15% on a quiet machine: the ratio is taken
 * between medians. (The patch upgrade runs once: after it there is no newer patch.)
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/**
 * Seconds of reading the rolling cluster's node list (4 connections, gzip) with no rollout and
 * then during one more restart (issue 18: the list's p99 while a rollout writes); 0 skips it.
 */
const LIST_SECONDS = Number(process.env.BENCH_LIST_SECONDS ?? 5);
const ADMIN_TOKEN = "bench-admin-token";
const FROM = "1.30.6-kls.1";

/** The monotonic clock in µs: the clock of a V8 CPU profile. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

const api = apiAs(ADMIN_TOKEN);

const pct = (value: number, of: number) => `${value >= of ? "+" : ""}${(((value - of) / of) * 100).toFixed(1)}%`;

/**
 * The baseline, measured in the same run: the same fleet and restart rule driven by a bare
 * orchestrator (bare-orchestrator.ts), in processes of their own like keelson-server's.
 */
async function bareBaseline(): Promise<{ makespanMs: number; batches: number }> {
  const port = await freePort();
  const server = spawnNode(
    ["--import", "tsx", "test/bench/rollout/bare-orchestrator.ts"],
    { PORT: String(port) },
    {
      ipc: true,
    },
  );
  const worker = spawnNode(["--import", "tsx", "test/bench/rollout/sim-worker.ts"], {}, { ipc: true });
  try {
    await waitMessage(server, "listening");
    log(`baseline: connecting ${WORKERS + 1} simulated agents to a bare orchestrator...`);
    await ask(
      worker,
      {
        type: "start",
        url: `http://127.0.0.1:${port}`,
        linkUrl: `ws://127.0.0.1:${port}/`,
        count: WORKERS + 1,
        phaseTimeMs: PHASE_MS,
        bare: true,
      },
      "started",
    );
    const rolled = await ask<{ makespanMs: number; batches: number }>(
      server,
      { type: "roll", percent: PERCENT },
      "rolled",
    );
    log(`baseline: bare restart of 1 master + ${WORKERS} workers in ${rolled.makespanMs} ms`);
    return rolled;
  } finally {
    await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(worker);
    await ask(server, { type: "stop" }, "stopped").catch(() => undefined);
    await stopChild(server);
  }
}

interface DialectRun {
  dialect: string;
  runs: {
    what: string;
    wallMs: number;
    opMs: number;
    cpuMs: number;
    /** PostgreSQL's own processes over the same window (0 on SQLite: it runs inside the server). */
    dbCpuMs: number;
    state: string;
    error: string | null;
  }[];
  counts: { restarts: number[]; upgrades: number[]; notOk: number };
  /** The node list read with no rollout, then during a restart (undefined: BENCH_LIST_SECONDS=0). */
  lists?: { idle: LoadResult; rolling: LoadResult; rollMs: number };
  cluster: Record<string, unknown>;
  rss: { rss: number; peak: number };
  /** The server's CPU per second with the fleet linked and nothing rolling, polled as during a rollout (idleCpu). */
  idleCpuMsPerS: number;
}

/**
 * What the server spends with nothing rolling, in ms of CPU per second: the fleet's heartbeats,
 * the replica's own timers, and the bench's poll of the last operation every POLL_MS (a rollout's
 * record names each of its nodes, about 40 KB for 1,001, read, serialised and compressed at each
 * poll). A rollout's CPU less this rate over its duration is what the rollout itself cost.
 */
async function idleCpu(base: string, pid: number, projectId: string, clusterId: string): Promise<number> {
  const seconds = 5;
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  const mono0 = monotonicUs();
  while (performance.now() - t0 < seconds * 1000) {
    await latestOperation(ADMIN_TOKEN, base, projectId, clusterId);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  log(`idle window (monotonic µs ${mono0} ${monotonicUs()})`);
  return ((cpuSeconds(pid) - cpu0) * 1000) / ((performance.now() - t0) / 1000);
}

/** The same cluster, restart and upgrade on a keelson-server on one store. */
async function rollWith(
  dialect: string,
  env: Record<string, string>,
  db?: { pid: number; stats?: StatementStats },
): Promise<DialectRun> {
  const dbPid = db?.pid;
  const fleet = await startBenchFleet({
    name: `rollout-${dialect}`,
    simWorker: "test/bench/rollout/sim-worker.ts",
    adminToken: ADMIN_TOKEN,
    env,
  });
  const { base, worker, pid, projectId } = fleet;
  try {
    log(`${dialect}: registering and connecting ${WORKERS + 1} simulated agents (phase time ${PHASE_MS} ms)...`);
    const hosts = await linkAgents(fleet, { adminToken: ADMIN_TOKEN, count: WORKERS + 1, phaseTimeMs: PHASE_MS });
    const clusterId = await buildBenchCluster(ADMIN_TOKEN, base, projectId, hosts, {
      name: "bench-rollout",
      version: FROM,
    });
    log(`${dialect}: cluster of 1 master + ${hosts.length - 1} workers ready; rolling...`);
    await new Promise((r) => setTimeout(r, 1000));

    const runs: DialectRun["runs"] = [];
    await db?.stats?.reset();
    const restart = [
      `v3 restart ?batchPercent=${PERCENT}`,
      `/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=${PERCENT}`,
      undefined,
    ] as const;
    for (const [what, url, body] of [
      ...Array.from({ length: ROUNDS }, () => restart),
      [
        `v4 upgrade type=patch batchUpgradePercent=${PERCENT}`,
        `/v4/${projectId}/clusters/${clusterId}/upgrade?type=patch`,
        { batchUpgradePercent: PERCENT },
      ],
    ] as const) {
      const cpu0 = cpuSeconds(pid);
      const db0 = dbPid ? treeCpuSeconds(dbPid) : 0;
      const t0 = performance.now();
      const mono0 = monotonicUs();
      const res = await api(`${base}${url}`, { method: "POST", ...(body ? { body } : {}) });
      if (res.status !== 200) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
      const done = await awaitOperation(ADMIN_TOKEN, base, projectId, clusterId, t0);
      const cpuMs = (cpuSeconds(pid) - cpu0) * 1000;
      const dbCpuMs = dbPid ? (treeCpuSeconds(dbPid) - db0) * 1000 : 0;
      runs.push({
        what,
        wallMs: done.wallMs,
        opMs: serverMs(done.op),
        cpuMs,
        dbCpuMs,
        state: done.op.state,
        error: done.op.error,
      });
      // The window on the clock of a CPU profile (BENCH_SERVER_NODE_ARGS="--cpu-prof …"), for cpu-profile-top.ts.
      log(
        `${dialect}: ${what}: ${done.op.state} in ${done.wallMs.toFixed(0)} ms${done.op.error ? ` (${done.op.error})` : ""} (monotonic µs ${mono0} ${monotonicUs()})`,
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    if (db?.stats) {
      log(`${dialect}: PostgreSQL's statements over the ${runs.length} rollouts, by execution time:`);
      process.stdout.write(`${(await db.stats.top()).join("\n")}\n`);
    }
    // After the rollouts: the operation polled is then as large as during one.
    const idleCpuMsPerS = await idleCpu(base, pid, projectId, clusterId);
    log(`${dialect}: ${idleCpuMsPerS.toFixed(1)} ms of server CPU a second with nothing rolling`);
    const lists = LIST_SECONDS > 0 ? await listsDuringRollout(dialect, base, projectId, clusterId) : undefined;
    const counts = await ask<DialectRun["counts"]>(worker, { type: "counts" }, "counts");
    const cluster = (await api<Record<string, unknown>>(`${base}/v3/${projectId}/clusters/${clusterId}`)).body;
    return { dialect, runs, counts, ...(lists ? { lists } : {}), cluster, rss: memoryMiB(pid), idleCpuMsPerS };
  } finally {
    await fleet.stop();
  }
}

/**
 * The rolling cluster's node list (1,001 records, gzip), read by 4 connections for LIST_SECONDS
 * with nothing rolling, then for as long again from the start of one more restart: what a
 * write-heavy rollout does to a reader's p99 (the cache is recomputed after each batch's writes).
 */
async function listsDuringRollout(
  dialect: string,
  base: string,
  projectId: string,
  clusterId: string,
): Promise<DialectRun["lists"]> {
  const url = `${base}/v4/${projectId}/clusters/${clusterId}/nodes`;
  const options = {
    headers: { "x-auth-token": ADMIN_TOKEN, "accept-encoding": "gzip" },
    connections: 4,
    durationSec: LIST_SECONDS,
  };
  const idle = await load("idle", url, options);
  const t0 = performance.now();
  const res = await api(`${base}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=${PERCENT}`, {
    method: "POST",
  });
  if (res.status !== 200) throw new Error(`restart with readers: ${res.status} ${JSON.stringify(res.body)}`);
  const [rolling, done] = await Promise.all([
    load("rolling", url, options),
    awaitOperation(ADMIN_TOKEN, base, projectId, clusterId, t0),
  ]);
  log(`${dialect}: node list p99 ${idle.p99} ms idle, ${rolling.p99} ms during a restart (${done.op.state})`);
  return { idle, rolling, rollMs: serverMs(done.op) };
}

async function main(): Promise<void> {
  const baseline = await bareBaseline();
  const pg = await startPostgres({ settings: SETTINGS });
  let results: DialectRun[];
  let stats: StatementStats | undefined;
  try {
    const url = await pg.createDatabase();
    stats = Object.keys(SETTINGS).length > 0 ? await statementStats(url) : undefined;
    results = [
      await rollWith("sqlite", {}),
      await rollWith("postgres", { KEELSON_DATABASE_URL: url, ...secretsKeyEnv() }, { pid: pg.postmasterPid(), stats }),
    ];
  } finally {
    await stats?.close();
    await pg.stop();
  }
  const batches = Math.ceil(WORKERS / Math.max(1, Math.floor((WORKERS * PERCENT) / 100)));
  const idealMs = (1 + batches) * PHASE_MS;
  const nodes = WORKERS + 1;
  const exactly = (list: number[], times: number) => list.filter((n) => n === times).length;
  const cpuOf = (d: DialectRun, what: string, withDb = false) =>
    median(d.runs.filter((r) => r.what === what).map((r) => r.cpuMs + (withDb ? r.dbCpuMs : 0)));
  const [sqlite, postgres] = results as [DialectRun, DialectRun];
  // The list reading adds one restart.
  const restarts = ROUNDS + (LIST_SECONDS > 0 ? 1 : 0);
  const kinds = [...new Set(sqlite.runs.map((r) => r.what))];
  const lines = [
    "",
    `Rollout benchmark — ${new Date().toISOString()}, node ${process.version}, 1 master + ${WORKERS} simulated workers, phase time ${PHASE_MS} ms, batch ${PERCENT}% (${batches} worker batches), simulators in a separate process`,
    "",
    `ideal makespan: (1 master + ${batches} batches) x ${PHASE_MS} ms = ${idealMs} ms`,
    "",
    `| store | rollout | state | wall ms (request..seen finished, polled every ${POLL_MS} ms) | operation ms (server) | vs ideal | vs bare baseline | overhead per step ms (vs baseline) | server CPU ms | CPU µs per node | less idle (µs per node) | PostgreSQL's CPU ms |`,
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
    `| – | baseline: bare orchestrator, same fleet and rule (restart) | succeeded | – | ${baseline.makespanMs} | ${pct(baseline.makespanMs, idealMs)} | – | – | – | – | – | – |`,
    ...results.flatMap((d) =>
      d.runs.map(
        (r) =>
          `| ${d.dialect} | ${r.what} | ${r.state} | ${r.wallMs.toFixed(0)} | ${r.opMs} | ${pct(r.opMs, idealMs)} | ${pct(r.opMs, baseline.makespanMs)} | ${((r.opMs - baseline.makespanMs) / (batches + 1)).toFixed(0)} | ${r.cpuMs.toFixed(0)} | ${((r.cpuMs * 1000) / nodes).toFixed(0)} | ${(((r.cpuMs - (d.idleCpuMsPerS * r.wallMs) / 1000) * 1000) / nodes).toFixed(0)} | ${d.dialect === "postgres" ? r.dbCpuMs.toFixed(0) : "– (inside the server)"} |`,
      ),
    ),
    "",
    ...kinds.map((what) => {
      const runs = sqlite.runs.filter((r) => r.what === what).length;
      const [a, b] = [cpuOf(sqlite, what), cpuOf(postgres, what)];
      const withDb = cpuOf(postgres, what, true);
      return [
        `${what}: server CPU per node postgres/sqlite = ${(b / a).toFixed(2)} (target <= 1.05; ${runs > 1 ? `medians of ${runs} runs, ` : ""}${a.toFixed(0)} vs ${b.toFixed(0)} ms)`,
        `  with PostgreSQL's own processes counted too: ${(withDb / a).toFixed(2)} (${a.toFixed(0)} vs ${withDb.toFixed(0)} ms; SQLite runs inside the server, so its figure has it already)`,
      ].join("\n");
    }),
    ...listLines(results),
    ...results.map(
      (d) =>
        `${d.dialect}: nodes restarted exactly ${restarts}x: ${exactly(d.counts.restarts, restarts)}/${nodes}; upgraded exactly once: ${exactly(d.counts.upgrades, 1)}/${nodes}; not ok at the end: ${d.counts.notOk}; cluster after: status ${d.cluster.status}, taskStatus ${d.cluster.taskStatus}, kubeRoleVersion ${d.cluster.kubeRoleVersion}; server RSS ${d.rss.rss.toFixed(0)} MiB (peak ${d.rss.peak.toFixed(0)} MiB)`,
    ),
    ...results.map(
      (d) =>
        `${d.dialect}: ${d.idleCpuMsPerS.toFixed(1)} ms of server CPU a second with the fleet linked and nothing rolling (heartbeats, timers, this bench's poll of the last operation every ${POLL_MS} ms); "less idle" takes that rate over each rollout's wall time off its CPU`,
    ),
    "overhead per step: (operation ms - bare baseline ms) / (1 + batches): the control plane's time between one batch being back",
    "and the next running (sending 100 commands, storing 200 node reports, the cursor writes); the simulators' own timer slack",
    "and WebSocket round trips are in both, so the baseline's distance from the ideal is theirs, not the control plane's.",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

function listLines(results: DialectRun[]): string[] {
  if (!results.every((d) => d.lists)) return [];
  const row = (d: DialectRun, r: LoadResult) =>
    `| ${d.dialect} | ${r.label} | ${r.requestsPerSec.toFixed(0)} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${r.errors + r.non2xx} |`;
  return [
    "",
    `The rolling cluster's node list (${WORKERS + 1} nodes, gzip, 4 connections, ${LIST_SECONDS} s each), with nothing rolling (the baseline) and from the start of one more restart:`,
    "",
    "| store | list read | req/s | p50 ms | p99 ms | errors |",
    "|---|---|---|---|---|---|",
    ...results.flatMap((d) => (d.lists ? [row(d, d.lists.idle), row(d, d.lists.rolling)] : [])),
    "",
    ...results.map(
      (d) =>
        `${d.dialect}: the restart with readers took ${d.lists?.rollMs} ms (operation), against ${median(d.runs.filter((r) => r.what.startsWith("v3")).map((r) => r.opMs))} ms without (median)`,
    ),
  ];
}

await main();
