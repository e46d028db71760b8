// `pnpm bench events`: clients of the project events stream (GET /v4/{project}/events) during
// a rollout of 1 master + BENCH_WORKERS simulated workers (v3 restart, batch 10%, phase time
// BENCH_PHASE_MS), the same restart run once per subscriber count (BENCH_SUBSCRIBERS, default
// 0,100,1000) on one server: the server's CPU for each restart beside the one with no
// subscriber (the baseline, same run), and how long a node's report took from the agent to
// every client (p50/p99). BENCH_DIALECT=postgres runs the server on PostgreSQL. Prints figures;
// never fails on a time.
import { startPostgres } from "../../support/postgres.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";
import { ask, spawnNode, stopChild } from "../agents/children.ts";
import { cpuSeconds, memoryMiB } from "../agents/proc-stats.ts";
import { apiAs } from "../support/admin-api.ts";
import { linkAgents, startBenchFleet } from "../support/bench-fleet.ts";
import { markdownTable } from "../support/markdown-table.ts";

const WORKERS = Number(process.env.BENCH_WORKERS ?? 1000);
const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 1000);
const SUBSCRIBERS = (process.env.BENCH_SUBSCRIBERS ?? "0,100,1000").split(",").map(Number);
const DIALECT = process.env.BENCH_DIALECT ?? "sqlite";
const ADMIN_TOKEN = "bench-admin-token";
const api = apiAs(ADMIN_TOKEN);

function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

/** Waits until the cluster's newest operation ended; its state. */
async function operationEnded(base: string, projectId: string, clusterId: string): Promise<string> {
  for (;;) {
    const { body } = await api<{ state: string }[]>(`${base}/v4/${projectId}/operations?target=${clusterId}&limit=1`);
    const state = body[0]?.state;
    if (state === "succeeded" || state === "failed") return state;
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface Delivery {
  reports: number;
  events: number;
  bytes: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

interface Row {
  subscribers: number;
  state: string;
  wallMs: number;
  cpuMs: number;
  /** The subscribers' process (it shares the machine: a reader that cannot keep up delays every client). */
  readerCpuMs: number;
  delivery: Delivery;
}

async function main(): Promise<void> {
  const pg = DIALECT === "postgres" ? await startPostgres() : undefined;
  const fleet = await startBenchFleet({
    name: "events",
    simWorker: "test/bench/rollout/sim-worker.ts",
    adminToken: ADMIN_TOKEN,
    env: pg ? { KEELSON_DATABASE_URL: await pg.createDatabase(), ...secretsKeyEnv() } : {},
  });
  const subscribers = spawnNode(["--import", "tsx", "test/bench/events/subscribers.ts"], {}, { ipc: true });
  const { base, pid, projectId } = fleet;
  const rows: Row[] = [];
  try {
    log(`${DIALECT}: registering and connecting ${WORKERS + 1} simulated agents (phase time ${PHASE_MS} ms)...`);
    const hosts = await linkAgents(fleet, { adminToken: ADMIN_TOKEN, count: WORKERS + 1, phaseTimeMs: PHASE_MS });
    const clusterId = (
      await api<{ uuid: string }>(`${base}/v4/${projectId}/clusters`, {
        method: "POST",
        body: { name: "bench-events", kubeRoleVersion: "1.30.6-kls.1" },
      })
    ).body.uuid;
    await operationEnded(base, projectId, clusterId);
    const [first, ...rest] = hosts;
    if (!first) throw new Error("no hosts");
    for (const members of [
      [{ uuid: first.uuid, isMaster: true }],
      rest.map((h) => ({ uuid: h.uuid, isMaster: false })),
    ]) {
      const res = await api(`${base}/v4/${projectId}/clusters/${clusterId}/attach`, { method: "POST", body: members });
      if (res.status !== 200) throw new Error(`attach: ${res.status} ${JSON.stringify(res.body)}`);
      await operationEnded(base, projectId, clusterId);
    }
    log(`${DIALECT}: cluster of 1 master + ${rest.length} workers ready`);

    let open = 0;
    for (const count of SUBSCRIBERS) {
      if (count > open) {
        await ask(
          subscribers,
          { type: "open", url: `${base}/v4/${projectId}/events`, token: ADMIN_TOKEN, count: count - open },
          "opened",
        );
        open = count;
      }
      // Whatever was on its way before this restart is not its figure.
      await new Promise((r) => setTimeout(r, 2000));
      await ask(subscribers, { type: "collect" }, "collected");
      log(`${DIALECT}: ${open} subscribers; restarting ${WORKERS + 1} nodes...`);
      const cpu0 = cpuSeconds(pid);
      const readerCpu0 = cpuSeconds(subscribers.pid as number);
      const t0 = performance.now();
      const res = await api(`${base}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=10`, {
        method: "POST",
      });
      if (res.status !== 200) throw new Error(`restart: ${res.status} ${JSON.stringify(res.body)}`);
      const state = await operationEnded(base, projectId, clusterId);
      const wallMs = performance.now() - t0;
      const cpuMs = (cpuSeconds(pid) - cpu0) * 1000;
      // The last reports may still be on their way to the clients.
      await new Promise((r) => setTimeout(r, 2000));
      const delivery = await ask<Delivery>(subscribers, { type: "collect" }, "collected");
      const readerCpuMs = (cpuSeconds(subscribers.pid as number) - readerCpu0) * 1000;
      rows.push({ subscribers: open, state, wallMs, cpuMs, readerCpuMs, delivery });
      log(`row ${JSON.stringify(rows.at(-1))}`);
    }
    const rss = memoryMiB(pid);
    const zero = rows.find((r) => r.subscribers === 0);
    const fmt = (n: number | null, digits = 0) => (n === null ? "-" : n.toFixed(digits));
    const table = markdownTable(
      [
        "subscribers",
        "restart",
        "wall ms",
        "server CPU ms",
        "CPU ms over 0 subscribers",
        "per subscriber ms",
        "reader CPU ms",
        "node.report deliveries",
        "MiB sent",
        "delay p50 ms",
        "p99 ms",
        "max ms",
      ],
      rows.map((r) => {
        const extra = zero ? r.cpuMs - zero.cpuMs : null;
        return [
          String(r.subscribers),
          r.state,
          fmt(r.wallMs),
          fmt(r.cpuMs),
          fmt(extra),
          r.subscribers > 0 && extra !== null ? fmt(extra / r.subscribers, 2) : "-",
          fmt(r.readerCpuMs),
          String(r.delivery.reports),
          fmt(r.delivery.bytes / 1048576, 1),
          fmt(r.delivery.p50),
          fmt(r.delivery.p99),
          fmt(r.delivery.max),
        ];
      }),
    );
    process.stdout.write(
      `\nEvents stream benchmark — ${new Date().toISOString()}, node ${process.version}, ${DIALECT}, 1 master + ${WORKERS} simulated workers, ` +
        `v3 restart batch 10%, phase time ${PHASE_MS} ms; subscribers in one separate process, each its own connection\n\n${table}\n\n` +
        "delay: from the simulated node's phase timestamp (set as it sends its report) to a subscriber reading the event, over every\n" +
        "subscriber and report; CPU: the server process, request to the operation seen finished (polled every 250 ms).\n" +
        `server RSS at the end ${rss.rss.toFixed(0)} MiB (peak ${rss.peak.toFixed(0)} MiB)\n`,
    );
  } finally {
    await ask(subscribers, { type: "close" }, "closed").catch(() => undefined);
    await stopChild(subscribers);
    await fleet.stop();
    await pg?.stop();
  }
}

await main();
