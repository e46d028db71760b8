import type { PostgresServer } from "../../support/postgres.ts";
import { cpuSeconds, memoryMiB, treeCpuSeconds } from "../agents/proc-stats.ts";
import { HeldFleet, seenWrites } from "./held-fleet.ts";
import { log, ReplicaSet } from "./replica-set.ts";
import { agentsPerReplica } from "./rollout-on-replicas.ts";

/**
 * Agents holding their links at a 5 s heartbeat on a set of replicas (held-fleet.ts: seeded
 * hosts, several simulator processes, an even share on each replica), sampled over a window
 * after each step of a growing fleet: each replica's RSS and CPU, the hosts whose last_seen it
 * wrote (heartbeats reach the table once per presence flush, not once per pong), and the
 * database's load (transactions committed per second, PostgreSQL's CPU). Two steps on one
 * replica give a per-agent slope that no start-up heap distorts (held-table.ts).
 */

export interface HeldReplica {
  id: string;
  agents: number;
  /** Right after the replica started (its start-up heap not yet collected). */
  idleRssMiB: number;
  rssMiB: number;
  cpuPercent: number;
  /** Hosts whose last_seen the window wrote, per second. */
  seenPerS: number;
}

export interface HeldFigures {
  label: string;
  agents: number;
  simulators: number;
  windowS: number;
  replicas: HeldReplica[];
  commitsPerS: number;
  dbCpuPercent: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `steps`: the fleet's size at each sample, growing; one figure per step. */
export async function agentsHeld(
  pg: PostgresServer,
  label: string,
  replicaCount: number,
  options: { steps: number[]; heartbeatMs: number; windowS: number },
): Promise<HeldFigures[]> {
  const set = await ReplicaSet.create(pg, `held-${replicaCount}`, replicaCount, {
    KEELSON_AGENT_HEARTBEAT_MS: String(options.heartbeatMs),
  });
  const fleet = new HeldFleet(set);
  const figures: HeldFigures[] = [];
  try {
    for (const r of set.replicas) await set.start(r);
    const pids = set.replicas.map((r) => r.server?.pid as number);
    const idle = pids.map((pid) => memoryMiB(pid).rss);
    let linked = 0;
    for (const step of options.steps) {
      const t = performance.now();
      await fleet.add(step - linked);
      linked = step;
      const on = await agentsPerReplica(set, fleet.workers);
      log(
        `${label}: ${step} agents linked in ${((performance.now() - t) / 1000).toFixed(0)} s (${JSON.stringify(on)})`,
      );
      // Past the links' first reports and presence writes: the steady state only.
      await sleep(2 * options.heartbeatMs);
      log(`${label}: sampling ${options.windowS} s...`);
      const cpu0 = pids.map(cpuSeconds);
      const db0 = treeCpuSeconds(pg.postmasterPid());
      const commits0 = await set.commits();
      const seen0 = await fleet.lastSeen();
      const t0 = performance.now();
      await sleep(options.windowS * 1000);
      const seconds = (performance.now() - t0) / 1000;
      const cpu1 = pids.map(cpuSeconds);
      const db1 = treeCpuSeconds(pg.postmasterPid());
      const commits1 = await set.commits();
      const seen = seenWrites(seen0, await fleet.lastSeen());
      figures.push({
        label,
        agents: step,
        simulators: fleet.workers.length,
        windowS: seconds,
        replicas: set.replicas.map((r, i) => ({
          id: r.id,
          agents: on[r.id] ?? 0,
          idleRssMiB: idle[i] as number,
          rssMiB: memoryMiB(pids[i] as number).rss,
          cpuPercent: (((cpu1[i] as number) - (cpu0[i] as number)) / seconds) * 100,
          seenPerS: (seen[r.id] ?? 0) / seconds,
        })),
        commitsPerS: (commits1 - commits0) / seconds,
        dbCpuPercent: ((db1 - db0) / seconds) * 100,
      });
    }
    return figures;
  } finally {
    await fleet.close();
    await set.close();
  }
}
