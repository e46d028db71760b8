import type { ChildProcess } from "node:child_process";
import postgres from "postgres";
import type { PostgresServer } from "../../support/postgres.ts";
import { secretsKeyEnv } from "../../support/secrets-key.ts";
import { ask, exited, spawnNode } from "../agents/children.ts";
import { cpuSeconds, treeCpuSeconds } from "../agents/proc-stats.ts";
import { apiAs, freePort } from "../support/admin-api.ts";
import { type BenchOperation, buildBenchCluster, latestOperation } from "../support/bench-cluster.ts";
import { type BenchServer, defaultProjectId, linkAgents, startBenchServer } from "../support/bench-fleet.ts";

/**
 * Control-plane replicas on one PostgreSQL database (each a keelson-server process with its own
 * id, port and data dir, all with the same secrets key, as in test/e2e/replica-failover.test.ts),
 * and one simulator process whose agents list every replica's link URL.
 */

export const ADMIN_TOKEN = "bench-admin-token";
export const api = apiAs(ADMIN_TOKEN);
const FROM = "1.30.6-kls.1";

export function log(line: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
}

export interface Replica {
  id: string;
  port: number;
  /** Running now (undefined: not started yet, or stopped). */
  server: BenchServer | undefined;
}

export class ReplicaSet {
  readonly replicas: Replica[];
  readonly worker: ChildProcess;
  projectId = "";
  clusterId = "";
  private readonly db: postgres.Sql;

  private constructor(
    private readonly name: string,
    readonly databaseUrl: string,
    replicas: Replica[],
    private readonly env: Record<string, string>,
  ) {
    this.replicas = replicas;
    this.db = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    this.worker = spawnNode(["--import", "tsx", "test/bench/rollout/sim-worker.ts"], {}, { ipc: true });
  }

  /** `count` replicas (ids `cp-1`…) on a new database of `pg`; none started yet. */
  static async create(pg: PostgresServer, name: string, count: number, env: Record<string, string> = {}) {
    const replicas = await Promise.all(
      Array.from({ length: count }, async (_, i) => ({ id: `cp-${i + 1}`, port: await freePort(), server: undefined })),
    );
    return new ReplicaSet(name, await pg.createDatabase(), replicas, env);
  }

  get(id: string): Replica {
    const found = this.replicas.find((r) => r.id === id);
    if (!found) throw new Error(`no replica ${id}`);
    return found;
  }

  running(): BenchServer[] {
    return this.replicas.flatMap((r) => (r.server ? [r.server] : []));
  }

  /** Starts a replica (again, on its port and with its id). */
  async start(r: Replica): Promise<BenchServer> {
    r.server = await startBenchServer({
      name: `${this.name}-${r.id}`,
      adminToken: ADMIN_TOKEN,
      port: r.port,
      env: {
        KEELSON_DATABASE_URL: this.databaseUrl,
        KEELSON_REPLICA_ID: r.id,
        KEELSON_PUBLIC_URL: `http://127.0.0.1:${r.port}`,
        ...secretsKeyEnv(),
        ...this.env,
      },
    });
    return r.server;
  }

  /** Stops a replica with `signal` without waiting for it to exit; resolves when it has. */
  stop(r: Replica, signal: NodeJS.Signals): Promise<void> {
    const server = r.server;
    r.server = undefined;
    return server ? server.stop(signal) : Promise.resolve();
  }

  linkUrls(): string[] {
    return this.replicas.map((r) => `ws://127.0.0.1:${r.port}/v1/agents/link`);
  }

  /**
   * Links `count` agents listing every replica's URL (each starts at a random one and moves on
   * while one does not run), registered through the first running replica.
   */
  async link(count: number, phaseTimeMs: number): Promise<{ uuid: string; name: string }[]> {
    const { base } = this.running()[0] as BenchServer;
    this.projectId = await defaultProjectId(base, ADMIN_TOKEN);
    log(`${this.name}: linking ${count} simulated agents to ${this.running().length} replica(s)...`);
    return linkAgents(
      { base, worker: this.worker, projectId: this.projectId },
      { adminToken: ADMIN_TOKEN, count, phaseTimeMs, linkUrl: this.linkUrls() },
    );
  }

  /**
   * Starts the first replica alone, links `count` agents (so all of them end on it: the others
   * do not run yet) and builds a cluster of one master and `count - 1` workers through it
   * (phase time `phaseTimeMs`); then starts the other replicas.
   */
  async buildOnFirst(count: number, phaseTimeMs: number): Promise<void> {
    const { base } = await this.start(this.replicas[0] as Replica);
    const hosts = await this.link(count, phaseTimeMs);
    this.clusterId = await buildBenchCluster(ADMIN_TOKEN, base, this.projectId, hosts, {
      name: `bench-${this.name}`,
      version: FROM,
    });
    for (const r of this.replicas.slice(1)) await this.start(r);
    log(`${this.name}: cluster of 1 master + ${count - 1} workers built; ${this.replicas.length} replica(s) running`);
  }

  /**
   * Asks `owner` for a rolling restart while every other running replica is held with SIGSTOP,
   * so that `owner` claims it (a rollout still advances only on the replica that holds its
   * nodes' links: README "Several replicas", not yet built); answers it once claimed.
   */
  async restartClaimedBy(owner: Replica | undefined, percent: number): Promise<BenchOperation> {
    const held = owner ? this.running().filter((s) => s !== owner.server) : [];
    const via = owner?.server ?? (this.running()[0] as BenchServer);
    for (const s of held) s.server.kill("SIGSTOP");
    try {
      const res = await api(
        `${via.base}/v3/${this.projectId}/clusters/${this.clusterId}/restart?batchPercent=${percent}`,
        {
          method: "POST",
        },
      );
      if (res.status !== 200) throw new Error(`restart: ${res.status} ${JSON.stringify(res.body)}`);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const op = await latestOperation(ADMIN_TOKEN, via.base, this.projectId, this.clusterId);
        if (op?.kind === "cluster.restart" && op.state !== "succeeded" && op.replica) {
          if (owner && op.replica !== owner.id) throw new Error(`restart claimed by ${op.replica}, not ${owner.id}`);
          return op;
        }
        if (Date.now() > deadline) throw new Error("restart not claimed within 30 s");
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      for (const s of held) s.server.kill("SIGCONT");
    }
  }

  /** The operation's owner as the database has it now. */
  async ownerOf(operationId: string): Promise<string | null> {
    const [row] = await this.db<{ owner: string | null }[]>`select owner from operations where id = ${operationId}`;
    return row?.owner ?? null;
  }

  /** Every node's restarts so far, as the simulated agents counted them. */
  async restarts(): Promise<number[]> {
    return (await ask<{ restarts: number[] }>(this.worker, { type: "counts" }, "counts")).restarts;
  }

  /** Transactions committed in this database so far (pg_stat_database; its figures lag up to a second). */
  async commits(): Promise<number> {
    const [row] = await this.db<{ n: string }[]>`
      select xact_commit::text as n from pg_stat_database where datname = current_database()`;
    return Number(row?.n ?? Number.NaN);
  }

  /** CPU seconds so far of every running replica, and of PostgreSQL's processes. */
  cpu(pg: PostgresServer): { replicas: number; db: number } {
    return {
      replicas: this.running().reduce((sum, s) => sum + cpuSeconds(s.pid), 0),
      db: treeCpuSeconds(pg.postmasterPid()),
    };
  }

  async close(): Promise<void> {
    await ask(this.worker, { type: "stop" }, "stopped").catch(() => undefined);
    if (this.worker.exitCode === null) this.worker.kill("SIGTERM");
    await exited(this.worker);
    for (const r of this.replicas) {
      r.server?.server.kill("SIGCONT");
      await this.stop(r, "SIGTERM");
    }
    await this.db.end();
  }
}

/** Nodes restarted once, twice or more, and never between two counts. */
export function restartDeltas(before: number[], after: number[]) {
  const deltas = after.map((n, i) => n - (before[i] ?? 0));
  return {
    once: deltas.filter((d) => d === 1).length,
    twice: deltas.filter((d) => d >= 2).length,
    never: deltas.filter((d) => d === 0).length,
  };
}
