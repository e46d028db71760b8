import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { generateSecret, hashSecret } from "../../../packages/control-plane/src/domain/identity/token-hash.ts";
import type { SimIdentity } from "../../sim/index.ts";
import { ask, exited, spawnNode } from "../agents/children.ts";
import { watchLinks } from "./link-watch.ts";
import type { ReplicaSet } from "./replica-set.ts";

/**
 * The held part's fleet (issue 17: 45,000 agents over three replicas). Its hosts are seeded
 * through the database as a registration leaves them (45,000 registrations through the API
 * would take minutes and measure the registration, not the links held), and its agents run in
 * several simulator processes of at most PER_SIMULATOR agents: one process holds one socket per
 * agent and stops at the open-files hard limit (`ulimit -Hn`, 20,000 here; children.ts raises
 * each child's soft limit to it). The simulators are dealt to the replicas in turn, an even share
 * of the agents on each, and every agent of a simulator links to its replica's URL alone, so the
 * spread is exact and stays put (the rollout part's agents list every URL instead).
 */
export const PER_SIMULATOR = 12_000;

/**
 * Link attempts in flight on one replica, shared by the simulators linking to it: below the
 * replica's listen backlog (Node's default, 511). With 500 per simulator and two simulators on
 * each of three replicas (45,000 agents), 1,000 attempts a replica overflowed the accept queues
 * (the kernel's ListenOverflows near 10,000 in the first minute), the dropped SYNs were resent
 * after 1, 3, 7… s, the replicas' event loops fell seconds behind, handshakes timed out after
 * 30 s and their agents backed off for up to 30 s: the fleet stalled near 34,500.
 */
export const CONNECTS_PER_REPLICA = Number(process.env.BENCH_CONNECTS_PER_REPLICA ?? 250);

/** `total` split into `parts` shares differing by at most one. */
export function evenShares(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

/** The simulators' hostnames (test/sim: `<prefix>-00001`…). */
const hostname = (prefix: string, i: number) => `${prefix}-${String(i + 1).padStart(5, "0")}`;

export class HeldFleet {
  readonly workers: ChildProcess[] = [];
  private readonly db: postgres.Sql;

  constructor(private readonly set: ReplicaSet) {
    this.db = postgres(set.databaseUrl, { max: 1, onnotice: () => {} });
  }

  /** Seeds `count` more hosts and links their agents, an even share on each running replica. */
  async add(count: number): Promise<void> {
    const replicas = this.set.replicas.filter((r) => r.server);
    const starts: Promise<unknown>[] = [];
    for (const [i, share] of evenShares(count, replicas.length).entries()) {
      const replica = replicas[i] as (typeof replicas)[number];
      const simulators = evenShares(share, Math.ceil(share / PER_SIMULATOR));
      for (const agents of simulators) {
        const namePrefix = `held${this.workers.length + 1}`;
        const identities = await this.seed(agents, namePrefix);
        const worker = spawnNode(["--import", "tsx", "test/bench/rollout/sim-worker.ts"], {}, { ipc: true });
        this.workers.push(worker);
        const start = {
          type: "start",
          url: `http://127.0.0.1:${replica.port}`,
          count: agents,
          identities,
          namePrefix,
          phaseTimeMs: 0,
          concurrency: Math.max(1, Math.floor(CONNECTS_PER_REPLICA / simulators.length)),
          linkUrl: `ws://127.0.0.1:${replica.port}/v1/agents/link`,
          // Each agent's own wait: at about 50 hellos a second per replica on this loaded machine,
          // the last of 45,000 links after some 15 minutes.
          connectTimeoutMs: 1_800_000,
        };
        starts.push(ask(worker, start, "started", start.connectTimeoutMs + 60_000));
      }
    }
    // Why links fail, while they link (issue 17: 45,000 once stalled near 34,500, no reason seen).
    const watch = watchLinks(
      `linking ${count} more`,
      () => this.workers,
      replicas.map((r) => r.server?.base as string),
    );
    try {
      await Promise.all(starts);
    } finally {
      await watch.stop();
    }
  }

  /** Hosts in the default project's local pool, as registerHost (domain/hosts/registration.ts) writes them. */
  private async seed(count: number, namePrefix: string): Promise<SimIdentity[]> {
    const [pool] = await this.db<{ id: string; projectId: string }[]>`
      select np.id, np.project_id as "projectId" from node_pools np
      join cloud_providers cp on cp.id = np.cloud_provider_id
      join projects p on p.id = np.project_id
      where p.name = 'default' and cp.type = 'local'`;
    if (!pool) throw new Error("the default project has no local node pool");
    const identities = Array.from({ length: count }, () => ({
      hostId: randomUUID(),
      credential: generateSecret("khc"),
      projectId: pool.projectId,
    }));
    const now = new Date().toISOString();
    const rows = identities.map((id, i) => ({
      id: id.hostId,
      project_id: pool.projectId,
      node_pool_id: pool.id,
      name: hostname(namePrefix, i),
      credential_hash: hashSecret(id.credential),
      agent_version: "0.0.0-sim",
      created_at: now,
    }));
    for (let i = 0; i < rows.length; i += 1000) await this.db`insert into nodes ${this.db(rows.slice(i, i + 1000))}`;
    return identities;
  }

  /** Each host's heartbeat time now (host_presence), and the replica holding its link (agent_links). */
  async lastSeen(): Promise<Map<string, { seen: string | null; replica: string | null }>> {
    const rows = await this.db<{ id: string; seen: string | null; replica: string | null }[]>`
      select n.id, p.last_seen as seen, l.replica from nodes n
        left join host_presence p on p.host_id = n.id left join agent_links l on l.host_id = n.id`;
    return new Map(rows.map((r) => [r.id, { seen: r.seen, replica: r.replica }]));
  }

  async close(): Promise<void> {
    await Promise.all(
      this.workers.map(async (worker) => {
        await ask(worker, { type: "stop" }, "stopped").catch(() => undefined);
        if (worker.exitCode === null) worker.kill("SIGTERM");
        await exited(worker);
      }),
    );
    await this.db.end();
  }
}

/** Per replica: the hosts whose last_seen changed between two reads (lastSeen), by the replica holding them at the end. */
export function seenWrites(
  before: Map<string, { seen: string | null }>,
  after: Map<string, { seen: string | null; replica: string | null }>,
): Record<string, number> {
  const by: Record<string, number> = {};
  for (const [id, now] of after) {
    if (now.replica && now.seen !== (before.get(id)?.seen ?? null)) by[now.replica] = (by[now.replica] ?? 0) + 1;
  }
  return by;
}
