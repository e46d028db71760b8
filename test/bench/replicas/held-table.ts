import { markdownTable } from "../support/markdown-table.ts";
import type { HeldFigures, HeldReplica } from "./agents-held.ts";
import { CONNECTS_PER_REPLICA, PER_SIMULATOR } from "./held-fleet.ts";

/**
 * The held part's table. The baseline is one replica sampled at two sizes of one fleet (half of
 * what it holds, then all): the difference ÷ the agents added is a per-agent slope that the
 * start-up heap does not distort (RSS after linking less RSS at start measured mostly its
 * collection). One replica cannot hold the 45,000: one process holds one socket per
 * agent and stops at the open-files hard limit; so each replica of three is compared with what
 * one replica's slope predicts for its share.
 */

interface Slope {
  agents: number;
  rssKiB: number;
  cpuUs: number;
  dbCpuUs: number;
  seenPerS: number;
}

const single = (f: HeldFigures) => f.replicas[0] as HeldReplica;

/** Per agent: (the larger sample − the smaller) ÷ the agents between them. */
function slopeOf(small: HeldFigures, large: HeldFigures): Slope {
  const agents = large.agents - small.agents;
  const [a, b] = [single(small), single(large)];
  return {
    agents,
    rssKiB: ((b.rssMiB - a.rssMiB) * 1024) / agents,
    cpuUs: ((b.cpuPercent - a.cpuPercent) * 10_000) / agents,
    dbCpuUs: ((large.dbCpuPercent - small.dbCpuPercent) * 10_000) / agents,
    seenPerS: (b.seenPerS - a.seenPerS) / agents,
  };
}

/** What one replica at `at` and the slope predict for `agents`: RSS MiB, CPU %, PostgreSQL's CPU %. */
function predicted(at: HeldFigures, slope: Slope, agents: number, dbAgents: number) {
  const base = single(at);
  return {
    rssMiB: base.rssMiB + ((agents - base.agents) * slope.rssKiB) / 1024,
    cpuPercent: base.cpuPercent + ((agents - base.agents) * slope.cpuUs) / 10_000,
    dbCpuPercent: at.dbCpuPercent + ((dbAgents - at.agents) * slope.dbCpuUs) / 10_000,
  };
}

const ratio = (measured: number, expected: number) => `${(measured / expected).toFixed(2)}×`;

export function heldTable(
  runs: HeldFigures[],
  setting: { agents: number; heartbeatMs: number; windowS: number; oneReplicaMax: number },
): string {
  const ones = runs.filter((h) => h.replicas.length === 1);
  const slope = ones.length >= 2 ? slopeOf(ones[0] as HeldFigures, ones.at(-1) as HeldFigures) : undefined;
  const baseline = ones.at(-1);
  const head = [
    "setup",
    "replica",
    "agents",
    "simulators",
    "RSS MiB (at start)",
    "CPU % of a core",
    "last_seen rows/s",
    "database: transactions/s",
    "PostgreSQL's CPU %",
    "measured ÷ one replica's slope: RSS / CPU / PostgreSQL",
  ];
  const lines = runs.flatMap((h) =>
    h.replicas.map((r, i) => {
      const expect =
        slope && baseline && h.replicas.length > 1 ? predicted(baseline, slope, r.agents, h.agents) : undefined;
      return [
        i === 0 ? `${h.label}, ${h.agents}` : "",
        r.id,
        String(r.agents),
        i === 0 ? String(h.simulators) : "",
        `${r.rssMiB.toFixed(0)} (${r.idleRssMiB.toFixed(0)})`,
        r.cpuPercent.toFixed(1),
        r.seenPerS.toFixed(0),
        i === 0 ? h.commitsPerS.toFixed(1) : "",
        i === 0 ? h.dbCpuPercent.toFixed(1) : "",
        expect
          ? `${ratio(r.rssMiB, expect.rssMiB)} / ${ratio(r.cpuPercent, expect.cpuPercent)} / ${i === 0 ? ratio(h.dbCpuPercent, expect.dbCpuPercent) : ""}`
          : "",
      ];
    }),
  );
  const slopes = slope
    ? `Per-agent slopes of one replica (${ones[0]?.agents} → ${baseline?.agents} agents, ${slope.agents} apart): RSS ${slope.rssKiB.toFixed(1)} KiB, CPU ${slope.cpuUs.toFixed(1)} µs per second, PostgreSQL's CPU ${slope.dbCpuUs.toFixed(1)} µs per second, last_seen ${(slope.seenPerS * 1000).toFixed(1)} rows/s per 1,000 agents. The last column divides each of the three replicas' figures (PostgreSQL's: the whole database's) by what one replica's figures at ${baseline?.agents} and these slopes predict for its agents (1.00×: the replicas cost nothing beyond their agents).`
    : "";
  return [
    `${setting.agents} agents at a ${setting.heartbeatMs / 1000} s heartbeat, window ${setting.windowS} s; the hosts seeded through the database, the agents in simulator processes of at most ${PER_SIMULATOR} (one process stops at the open-files hard limit), each simulator's agents linked to one replica, the simulators dealt to the replicas in turn, at most ${CONNECTS_PER_REPLICA} link attempts in flight per replica (BENCH_CONNECTS_PER_REPLICA; below the listen backlog of 511). Baseline: one replica holding ${setting.oneReplicaMax} (BENCH_HELD_ONE; at most about 15,000, the same limit: one replica cannot hold 45,000), sampled at half of it and at all.`,
    "",
    markdownTable(head, lines),
    "",
    slopes,
  ].join("\n");
}
