import type { PostgresServer } from "../../support/postgres.ts";
import { cpuSeconds, memoryMiB, treeCpuSeconds } from "../agents/proc-stats.ts";
import { log, ReplicaSet } from "./replica-set.ts";
import { agentsPerReplica } from "./rollout-on-replicas.ts";

/**
 * Agents holding their links at a 5 s heartbeat, spread over the replicas (each agent starts at
 * a random one of the URLs it lists), against one replica holding them all: each replica's RSS
 * and CPU over a window (the per-agent slopes between the setups: run.ts heldSlopes), and the
 * database's load (transactions committed per second, PostgreSQL's CPU).
 */

export interface HeldReplica {
  id: string;
  agents: number;
  /** Right after the replica started (its start-up heap not yet collected). */
  idleRssMiB: number;
  rssMiB: number;
  cpuPercent: number;
}

export interface HeldFigures {
  label: string;
  agents: number;
  windowS: number;
  replicas: HeldReplica[];
  commitsPerS: number;
  dbCpuPercent: number;
}

export async function agentsHeld(
  pg: PostgresServer,
  label: string,
  replicaCount: number,
  options: { agents: number; heartbeatMs: number; windowS: number },
): Promise<HeldFigures> {
  const set = await ReplicaSet.create(pg, `held-${replicaCount}`, replicaCount, {
    KEELSON_AGENT_HEARTBEAT_MS: String(options.heartbeatMs),
  });
  try {
    for (const r of set.replicas) await set.start(r);
    const idle = new Map(set.replicas.map((r) => [r.id, memoryMiB(r.server?.pid as number).rss]));
    await set.link(options.agents, 0);
    const on = await agentsPerReplica(set);
    // Past the links' first reports and presence writes: the steady state only.
    await new Promise((r) => setTimeout(r, 2 * options.heartbeatMs));
    log(`${label}: ${options.agents} agents linked (${JSON.stringify(on)}); sampling ${options.windowS} s...`);
    const pids = set.replicas.map((r) => r.server?.pid as number);
    const cpu0 = pids.map(cpuSeconds);
    const db0 = treeCpuSeconds(pg.postmasterPid());
    const commits0 = await set.commits();
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, options.windowS * 1000));
    const seconds = (performance.now() - t0) / 1000;
    const commits1 = await set.commits();
    return {
      label,
      agents: options.agents,
      windowS: seconds,
      replicas: set.replicas.map((r, i) => ({
        id: r.id,
        agents: on[r.id] ?? 0,
        idleRssMiB: idle.get(r.id) as number,
        rssMiB: memoryMiB(pids[i] as number).rss,
        cpuPercent: ((cpuSeconds(pids[i] as number) - (cpu0[i] as number)) / seconds) * 100,
      })),
      commitsPerS: (commits1 - commits0) / seconds,
      dbCpuPercent: ((treeCpuSeconds(pg.postmasterPid()) - db0) / seconds) * 100,
    };
  } finally {
    await set.close();
  }
}
