import { ask } from "../agents/children.ts";
import { awaitOperation, serverMs } from "../support/bench-cluster.ts";
import type { BenchServer } from "../support/bench-fleet.ts";
import { ADMIN_TOKEN, log, type Replica, type ReplicaSet, restartDeltas } from "./replica-set.ts";

/**
 * Failover (issue 17, "Benchmark"): a staggered restart run by `owner`, which holds every
 * agent's link; `survivor` runs beside it. First the same restart to its end (the baseline),
 * then again, and once a third of the workers restarted the owner is stopped with `signal`:
 * the time from the signal to the survivor's API answering, to every agent linked again (to
 * the survivor, the only one left in their list), to the operation claimed by the survivor
 * (its owner in the database), and the nodes restarted twice (the simulators' own counts).
 */

export interface FailoverRound {
  state: string;
  error: string | null;
  wallMs: number;
  opMs: number;
  /** A GET of the cluster through the survivor: sent after the signal (or at the same point of the baseline). */
  apiMs: number;
  twice: number;
  never: number;
}

export interface FailoverFigures {
  signal: "SIGKILL" | "SIGTERM";
  owner: string;
  survivor: string;
  baseline: FailoverRound;
  run: FailoverRound & {
    relinkMs: number;
    resumedMs: number;
    /** Answers other than 200 from the survivor's API, polled every 100 ms from the signal to the end. */
    apiRefused: number;
    apiPolls: number;
  };
}

/** The owner is stopped once this share of the workers restarted. */
export const MIDWAY_PERCENT = 30;

async function timedGet(url: string): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, { headers: { "x-auth-token": ADMIN_TOKEN } });
  await res.arrayBuffer();
  return { status: res.status, ms: performance.now() - t0 };
}

/** Polls until `probe` answers something; the time it did (Date.now()). */
async function when(
  what: string,
  probe: () => Promise<boolean>,
  everyMs: number,
  timeoutMs = 180_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return Date.now();
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function failover(
  set: ReplicaSet,
  owner: Replica,
  survivor: Replica,
  signal: "SIGKILL" | "SIGTERM",
  options: { workers: number; percent: number },
): Promise<FailoverFigures> {
  const { projectId, clusterId } = set;
  const via = survivor.server as BenchServer;
  const clusterUrl = `${via.base}/v3/${projectId}/clusters/${clusterId}`;
  const midway = Math.ceil((options.workers * MIDWAY_PERCENT) / 100);
  const restartedSince = async (before: number[]) =>
    (await set.restarts()).reduce((n, r, i) => n + r - (before[i] ?? 0), 0) >= midway;

  // The baseline: the same restart by the same owner, nobody stopped.
  let before = await set.restarts();
  let t0 = performance.now();
  await set.restartClaimedBy(owner, options.percent);
  await when("baseline midway", () => restartedSince(before), 50);
  const baselineApi = await timedGet(clusterUrl);
  const base = await awaitOperation(ADMIN_TOKEN, (owner.server as BenchServer).base, projectId, clusterId, t0);
  const baseCounts = restartDeltas(before, await set.restarts());
  log(`failover ${signal}: baseline restart by ${owner.id} ${base.op.state} in ${base.wallMs.toFixed(0)} ms`);
  const baseline: FailoverRound = {
    state: base.op.state,
    error: base.op.error,
    wallMs: base.wallMs,
    opMs: serverMs(base.op),
    apiMs: baselineApi.ms,
    twice: baseCounts.twice,
    never: baseCounts.never,
  };

  before = await set.restarts();
  t0 = performance.now();
  const op = await set.restartClaimedBy(owner, options.percent);
  await when("midway", () => restartedSince(before), 50);
  await ask(set.worker, { type: "mark" }, "marked");
  const relinked = ask<{ at: number }>(set.worker, { type: "relinked", timeoutMs: 180_000 }, "relinked");
  const stoppedAt = Date.now();
  const stopped = set.stop(owner, signal);
  log(`failover ${signal}: ${owner.id} stopped with ${signal} after ${midway} worker restarts`);

  const apiAt = await when("the survivor's API", async () => (await timedGet(clusterUrl)).status === 200, 10);
  const statuses: number[] = [];
  let polling = true;
  const poll = (async () => {
    while (polling) {
      statuses.push(
        await timedGet(clusterUrl).then(
          (r) => r.status,
          () => 0,
        ),
      );
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    const resumedAt = await when(
      "claimed by the survivor",
      async () => (await set.ownerOf(op.uuid)) === survivor.id,
      20,
    );
    const done = await awaitOperation(ADMIN_TOKEN, via.base, projectId, clusterId, t0);
    const relinkAt = (await relinked).at;
    const counts = restartDeltas(before, await set.restarts());
    log(`failover ${signal}: restart ${done.op.state} on ${done.op.replica} in ${done.wallMs.toFixed(0)} ms`);
    return {
      signal,
      owner: owner.id,
      survivor: survivor.id,
      baseline,
      run: {
        state: done.op.state,
        error: done.op.error,
        wallMs: done.wallMs,
        opMs: serverMs(done.op),
        apiMs: apiAt - stoppedAt,
        relinkMs: relinkAt - stoppedAt,
        resumedMs: resumedAt - stoppedAt,
        twice: counts.twice,
        never: counts.never,
        apiRefused: statuses.filter((s) => s !== 200).length,
        apiPolls: statuses.length,
      },
    };
  } finally {
    polling = false;
    await poll;
    await stopped;
  }
}
