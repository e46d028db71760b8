import type { ChildProcess } from "node:child_process";
import type { PostgresServer } from "../../support/postgres.ts";
import { ask } from "../agents/children.ts";
import { awaitOperation, serverMs } from "../support/bench-cluster.ts";
import type { BenchServer } from "../support/bench-fleet.ts";
import { ADMIN_TOKEN, log, type Replica, type ReplicaSet, restartDeltas } from "./replica-set.ts";

/**
 * One staggered restart on a set of replicas, measured: wall and operation time, the CPU of
 * every running replica and of PostgreSQL's processes over it, how the agents' links were
 * spread over the replicas, and each node's restarts (the simulators' counts).
 */

export interface RolloutFigures {
  label: string;
  replicas: number;
  /** Agents linked per replica id when the restart began. */
  agentsOn: Record<string, number>;
  claimedBy: string | null;
  state: string;
  error: string | null;
  wallMs: number;
  opMs: number;
  replicasCpuMs: number;
  dbCpuMs: number;
  once: number;
  twice: number;
  never: number;
}

/** Agents linked through each replica now, by replica id, over the simulator processes `workers` (default the set's one). */
export async function agentsPerReplica(
  set: ReplicaSet,
  workers: ChildProcess[] = [set.worker],
): Promise<Record<string, number>> {
  const byPort = new Map(set.replicas.map((r) => [String(r.port), r.id]));
  const on: Record<string, number> = {};
  for (const worker of workers) {
    const { by } = await ask<{ by: Record<string, number> }>(worker, { type: "where" }, "where");
    for (const [url, n] of Object.entries(by)) {
      const id = byPort.get(new URL(url).port) ?? url;
      on[id] = (on[id] ?? 0) + n;
    }
  }
  return on;
}

/**
 * How long after the agents linked again a restart starts: the replicas write what the new
 * links changed (presence, 100 ms later, in one transaction per replica holding its hosts' rows
 * locked while its updates run) after the agents count themselves linked; measured at once,
 * those writes fell into the restart's window and stalled its report writes behind their locks.
 */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_MS ?? 3000);

/**
 * Moves every agent to a random replica of its list (as if all had run when the agents
 * started), waits until each is linked again and what that wrote has settled.
 */
export async function spreadAgents(set: ReplicaSet): Promise<void> {
  await ask(set.worker, { type: "mark" }, "marked");
  await ask(set.worker, { type: "spread" }, "spread");
  await ask(set.worker, { type: "relinked", timeoutMs: 180_000 }, "relinked");
  await new Promise((r) => setTimeout(r, SETTLE_MS));
}

/** A restart claimed by `owner` (undefined: by whichever replica claims it), measured. */
export async function measuredRestart(
  set: ReplicaSet,
  pg: PostgresServer,
  label: string,
  owner: Replica | undefined,
  percent: number,
): Promise<RolloutFigures> {
  const agentsOn = await agentsPerReplica(set);
  const before = await set.restarts();
  const cpu0 = set.cpu(pg);
  // The monotonic clock of a replica's CPU profile (BENCH_SERVER_NODE_ARGS="--cpu-prof …"), in
  // µs: cpu-profile-top.ts reads the restart's window with these.
  const us0 = process.hrtime.bigint() / 1000n;
  const t0 = performance.now();
  const op = await set.restartClaimedBy(owner, percent);
  const via = (owner?.server ?? set.running()[0]) as BenchServer;
  const done = await awaitOperation(ADMIN_TOKEN, via.base, set.projectId, set.clusterId, t0);
  const cpu1 = set.cpu(pg);
  const counts = restartDeltas(before, await set.restarts());
  log(
    `${label}: restart ${done.op.state} in ${done.wallMs.toFixed(0)} ms${done.op.error ? ` (${done.op.error})` : ""}, monotonic µs ${us0}–${process.hrtime.bigint() / 1000n}`,
  );
  return {
    label,
    replicas: set.running().length,
    agentsOn,
    claimedBy: op.replica,
    state: done.op.state,
    error: done.op.error,
    wallMs: done.wallMs,
    opMs: serverMs(done.op),
    replicasCpuMs: (cpu1.replicas - cpu0.replicas) * 1000,
    dbCpuMs: (cpu1.db - cpu0.db) * 1000,
    ...counts,
  };
}
