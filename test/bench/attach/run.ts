import { ask } from "../agents/children.ts";
import { cpuSeconds, memoryMiB } from "../agents/proc-stats.ts";
import { apiAs } from "../support/admin-api.ts";
import { startBenchFleet } from "../support/bench-fleet.ts";
import { checkoutRevision, currentRevision, previousRevisionSetting } from "../support/previous-revision.ts";
import { benchRealAgents, masterServiceTable, phaseTable, type RealAgentsResult } from "./real-agents.ts";
import { medianResult } from "./rounds.ts";
import { sideBySide } from "./side-by-side.ts";

const NODES = Number(process.env.BENCH_NODES ?? 1000);
const ADMIN_TOKEN = "bench-admin-token";

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

const api = apiAs(ADMIN_TOKEN);

interface Operation {
  uuid: string;
  state: string;
  error: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  createdAt: string;
}

/** Polls the cluster's newest operation until it has finished; returns it and the wall time seen. */
async function awaitOperation(base: string, projectId: string, clusterId: string, t0: number) {
  for (;;) {
    const { body } = await api<Operation[]>(`${base}/v4/${projectId}/operations?target=${clusterId}&limit=1`);
    const op = body[0];
    if (op && (op.state === "succeeded" || op.state === "failed")) return { op, wallMs: performance.now() - t0 };
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface PingReport {
  hosts: number;
  ok: number;
  totalMs: number;
  latencyMs: { p50: number; p99: number; max: number } | null;
}

async function main(): Promise<void> {
  const fleet = await startBenchFleet({
    name: "attach",
    simWorker: "test/bench/agents/sim-worker.ts",
    adminToken: ADMIN_TOKEN,
  });
  const { base, worker, pid, projectId } = fleet;
  try {
    log(`registering and connecting ${NODES} simulated agents (phase time 0)...`);
    const started = await ask<{ registerMs: number; connectMs: number; connected: number }>(
      worker,
      { type: "start", url: base, adminToken: ADMIN_TOKEN, projectId, count: NODES },
      "started",
    );
    log(
      `${started.connected} connected (register ${(started.registerMs / 1000).toFixed(1)} s, connect ${(started.connectMs / 1000).toFixed(1)} s)`,
    );
    await new Promise((r) => setTimeout(r, 2000));

    // Baseline: one command to every agent at once, twice (the second is warm).
    const pings: { report: PingReport; cpuMs: number }[] = [];
    for (let i = 0; i < 2; i++) {
      const cpu0 = cpuSeconds(pid);
      const { body } = await api<PingReport>(`${base}/v1/agents/ping`, { method: "POST", body: { timeoutMs: 60_000 } });
      pings.push({ report: body, cpuMs: (cpuSeconds(pid) - cpu0) * 1000 });
    }
    log(`ping all: ${pings.map((p) => `${p.report.ok}/${p.report.hosts} in ${p.report.totalMs} ms`).join(", ")}`);

    const hosts = (await api<{ uuid: string; name: string }[]>(`${base}/v4/${projectId}/nodes`)).body.sort((a, b) =>
      a.name.localeCompare(b.name),
    );
    const created = await api<{ uuid: string }>(`${base}/v4/${projectId}/clusters`, {
      method: "POST",
      body: { name: "bench-attach" },
    });
    const clusterId = created.body.uuid;
    await awaitOperation(base, projectId, clusterId, performance.now());

    const [first, ...rest] = hosts;
    if (!first) throw new Error("no hosts");
    const cpuMaster0 = cpuSeconds(pid);
    const tMaster = performance.now();
    const masterRes = await api(`${base}/v4/${projectId}/clusters/${clusterId}/attach`, {
      method: "POST",
      body: [{ uuid: first.uuid, isMaster: true }],
    });
    const masterRequestMs = performance.now() - tMaster;
    if (masterRes.status !== 200)
      throw new Error(`attach master: ${masterRes.status} ${JSON.stringify(masterRes.body)}`);
    const master = await awaitOperation(base, projectId, clusterId, tMaster);
    const cpuMasterMs = (cpuSeconds(pid) - cpuMaster0) * 1000;
    log(`master: ${master.op.state} in ${master.wallMs.toFixed(0)} ms`);

    const cpuWorkers0 = cpuSeconds(pid);
    const tWorkers = performance.now();
    const workersRes = await api(`${base}/v4/${projectId}/clusters/${clusterId}/attach`, {
      method: "POST",
      body: rest.map((h) => ({ uuid: h.uuid, isMaster: false })),
    });
    const workersRequestMs = performance.now() - tWorkers;
    if (workersRes.status !== 200)
      throw new Error(`attach workers: ${workersRes.status} ${JSON.stringify(workersRes.body)}`);
    const workers = await awaitOperation(base, projectId, clusterId, tWorkers);
    const cpuWorkersMs = (cpuSeconds(pid) - cpuWorkers0) * 1000;
    log(
      `${rest.length} workers: ${workers.op.state} in ${workers.wallMs.toFixed(0)} ms${workers.op.error ? ` (${workers.op.error})` : ""}`,
    );

    const cluster = (await api<Record<string, unknown>>(`${base}/v4/${projectId}/clusters/${clusterId}`)).body;
    const nodes = (await api<{ status: string; clusterUuid: string | null }[]>(`${base}/v4/${projectId}/nodes`)).body;
    const okInCluster = nodes.filter((n) => n.status === "ok" && n.clusterUuid === clusterId).length;

    // Detach the workers again (one request): the reverse path, for comparison.
    const cpuDetach0 = cpuSeconds(pid);
    const tDetach = performance.now();
    await api(`${base}/v4/${projectId}/clusters/${clusterId}/detach`, {
      method: "POST",
      body: rest.map((h) => ({ uuid: h.uuid, isMaster: false })),
    });
    const detach = await awaitOperation(base, projectId, clusterId, tDetach);
    const cpuDetachMs = (cpuSeconds(pid) - cpuDetach0) * 1000;
    const rss = memoryMiB(pid);

    const serverMs = (op: Operation) =>
      op.startedAt && op.finishedAt ? Date.parse(op.finishedAt) - Date.parse(op.startedAt) : Number.NaN;
    const warm = pings[1] as { report: PingReport; cpuMs: number };
    const n = rest.length;
    const lines = [
      "",
      `Attach benchmark — ${new Date().toISOString()}, node ${process.version}, ${NODES} simulated agents (phase time 0), simulators in a separate process`,
      "",
      `cluster after attach: status ${cluster.status}, taskStatus ${cluster.taskStatus}, numMasters ${cluster.numMasters}, numWorkers ${cluster.numWorkers}, masterStatus ${cluster.masterStatus}, workerStatus ${cluster.workerStatus}; nodes ok in the cluster: ${okInCluster}/${NODES}`,
      "",
      "| step | request ms | until all ok (wall) ms | operation ms (server) | server CPU ms | per node: wall ms | per node: CPU ms |",
      "|---|---|---|---|---|---|---|",
      `| attach 1 master | ${masterRequestMs.toFixed(1)} | ${master.wallMs.toFixed(0)} | ${serverMs(master.op)} | ${cpuMasterMs.toFixed(0)} | ${master.wallMs.toFixed(1)} | ${cpuMasterMs.toFixed(1)} |`,
      `| attach ${n} workers (1 request) | ${workersRequestMs.toFixed(1)} | ${workers.wallMs.toFixed(0)} | ${serverMs(workers.op)} | ${cpuWorkersMs.toFixed(0)} | ${(workers.wallMs / n).toFixed(3)} | ${(cpuWorkersMs / n).toFixed(3)} |`,
      `| detach ${n} workers (1 request) | - | ${detach.wallMs.toFixed(0)} | ${serverMs(detach.op)} | ${cpuDetachMs.toFixed(0)} | ${(detach.wallMs / n).toFixed(3)} | ${(cpuDetachMs / n).toFixed(3)} |`,
      `| baseline: ping all ${warm.report.hosts} (cold) | - | ${(pings[0] as { report: PingReport }).report.totalMs} | - | ${(pings[0] as { cpuMs: number }).cpuMs.toFixed(0)} | ${((pings[0] as { report: PingReport }).report.totalMs / warm.report.hosts).toFixed(3)} | ${((pings[0] as { cpuMs: number }).cpuMs / warm.report.hosts).toFixed(3)} |`,
      `| baseline: ping all ${warm.report.hosts} (warm) | - | ${warm.report.totalMs} | - | ${warm.cpuMs.toFixed(0)} | ${(warm.report.totalMs / warm.report.hosts).toFixed(3)} | ${(warm.cpuMs / warm.report.hosts).toFixed(3)} |`,
      "",
      `ping latency (warm): p50 ${warm.report.latencyMs?.p50} ms, p99 ${warm.report.latencyMs?.p99} ms; server RSS now ${rss.rss.toFixed(0)} MiB (peak ${rss.peak.toFixed(0)} MiB)`,
      "until all ok: from sending the attach request to seeing its operation finished (polled every 20 ms); operation ms: its startedAt..finishedAt;",
      "server CPU: user+system of the server process over that span (/proc/<pid>/stat, 10 ms ticks); a worker attach is one node.join command,",
      "two node.report frames (converging, ok) stored and awaited, and the cursor/progress writes; the ping baseline is one command round trip.",
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  } finally {
    await fleet.stop();
  }
}

function currentOnly(real: RealAgentsResult, note: string): string {
  return [
    "",
    `Real agents — 1 master then 2 workers (one request), node package test/fixtures/node-package: attach master ${real.masterAttachMs.toFixed(0)} ms, attach workers ${real.workersAttachMs.toFixed(0)} ms, detach all ${real.detachAllMs.toFixed(0)} ms (request to operation finished)`,
    `previous release: not measured (${note})`,
    ...(real.errors.length > 0 ? [`errors: ${real.errors.join("; ")}`] : []),
    "",
    "Wall time of each phase's last start as the agent reports it (durationMs; – = not a phase of that role, drain-pods is stop-only):",
    "",
    phaseTable(real),
    "",
    "The master's services after the workers attached, sampled together over 5 s (same run):",
    "",
    masterServiceTable(real),
  ].join("\n");
}

const REAL = process.env.BENCH_REAL !== "0";
/** BENCH_REAL_ROUNDS: runs of each revision's real agents, taken in turn; the side-by-side compares their medians. */
const ROUNDS = Math.max(1, Number(process.env.BENCH_REAL_ROUNDS ?? 3));
// The previous revision is checked out first: a bad BENCH_PREVIOUS fails before the long part.
const previous = REAL ? previousRevisionSetting() : undefined;
const previousTree = previous && "rev" in previous ? checkoutRevision(previous.rev, log) : undefined;
try {
  await main();
  if (REAL) {
    if (previousTree) {
      const prevLabel = previousTree.commit.slice(0, 7);
      const order = `previous (${prevLabel}, from ${previous && "source" in previous ? previous.source : ""}) and this tree in turn, previous first, ${ROUNDS} run${ROUNDS > 1 ? "s each: medians" : " each"}`;
      const prevRuns: RealAgentsResult[] = [];
      const curRuns: RealAgentsResult[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        log(`round ${round}/${ROUNDS}: attaching 3 real agents of ${previousTree.rev} (its test node package)...`);
        prevRuns.push(await benchRealAgents(log, previousTree.root));
        log(`round ${round}/${ROUNDS}: attaching 3 real agents of this tree (test node package)...`);
        curRuns.push(await benchRealAgents(log));
      }
      process.stdout.write(
        `${sideBySide(
          { label: prevLabel, result: medianResult(prevRuns) },
          { label: currentRevision(), result: medianResult(curRuns) },
          order,
        )}\n`,
      );
    } else {
      log("attaching 3 real agents (test node package)...");
      const real = await benchRealAgents(log);
      process.stdout.write(`${currentOnly(real, previous && "reason" in previous ? previous.reason : "")}\n`);
    }
  }
} finally {
  previousTree?.remove();
}
