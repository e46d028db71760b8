import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../support/postgres.ts";
import { secretsKeyEnv } from "../support/secrets-key.ts";
import type { AgentProc } from "./support/agents.ts";
import { buildCluster, expectNodesOkAndUncordoned, startNodeAgents, tearDownHosts } from "./support/node-checks.ts";
import type { NodeHostDirs } from "./support/node-hosts.ts";
import { api, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * PostgreSQL restarted in the middle of a rolling restart of a three-node cluster of real
 * agents, keelson-server left running: requests meanwhile answer 503 with Retry-After (never
 * 500), the operation waits for the database and carries on by itself, and every node was
 * restarted exactly once (the agents' own "restarting node phases" log lines).
 */

const ADMIN = "e2e-admin-token";
const HOSTS = [
  { name: "master-61", ip: "127.0.0.61", isMaster: true },
  { name: "worker-62", ip: "127.0.0.62", isMaster: false },
  { name: "worker-63", ip: "127.0.0.63", isMaster: false },
] as const;
const restartsIn = (agent: AgentProc) => agent.output().split('"msg":"restarting node phases"').length - 1;

describe("PostgreSQL restarted during a rolling restart", () => {
  let pg: PostgresServer;
  let server: ServerProc;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-pg-restart-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    pg = await startPostgres();
    server = await startServer({
      adminToken: ADMIN,
      env: {
        KEELSON_DATABASE_URL: await pg.createDatabase(),
        ...secretsKeyEnv(),
        KEELSON_AGENT_HEARTBEAT_MS: "2000",
        KEELSON_NODE_RESTART_TIMEOUT_MS: "60000",
      },
    });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    await startNodeAgents({ serverUrl: server.url, token: ADMIN, projectId, hosts: HOSTS, scratch, agents, dirs, ids });
  }, 120_000);

  afterAll(async () => {
    await tearDownHosts({ agents, server, dirs, scratch });
    await pg?.stop();
  }, 60_000);

  it("builds a cluster of one master and two workers", async () => {
    clusterId = await buildCluster(
      server.url,
      ADMIN,
      projectId,
      { name: "e2e-pg-restart", containersCidr: "10.60.0.0/16", servicesCidr: "10.61.0.0/16" },
      HOSTS.map((h) => ({ uuid: ids[h.name] as string, isMaster: h.isMaster })),
      180_000,
    );
  }, 200_000);

  it("finishes the restart once the database is back: no 500, each node restarted once, all ok", async () => {
    const before = Object.fromEntries(HOSTS.map((h) => [h.name, restartsIn(agents[h.name] as AgentProc)]));
    const res = await api(`${server.url}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=50`, ADMIN, {
      method: "POST",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const firstWorker = agents["worker-62"] as AgentProc;
    await waitUntil(
      "the first worker restarting",
      async () => restartsIn(firstWorker) === (before["worker-62"] as number) + 1,
      120_000,
      50,
    );

    // Clients keep asking while the database is away.
    const statuses: number[] = [];
    let polling = true;
    const poll = (async () => {
      for (let i = 0; polling && i < 2_000; i++) {
        const r = await fetch(`${server.url}/v3/${projectId}/clusters/${clusterId}`, {
          headers: { "x-auth-token": ADMIN },
        });
        statuses.push(r.status);
        if (r.status === 503) expect(r.headers.get("retry-after")).toBe("5");
        await r.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    await pg.restart(3_000);

    const op = await waitUntil(
      "the restart operation finished",
      async () => {
        const ops = await api<{ kind: string; state: string; error: string | null }[]>(
          `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
          ADMIN,
        );
        const latest = ops.body[0];
        return latest?.kind === "cluster.restart" && latest.state !== "running" && latest.state !== "pending"
          ? latest
          : undefined;
      },
      150_000,
      250,
    );
    polling = false;
    await poll;
    expect(op).toMatchObject({ state: "succeeded", error: null });
    expect(statuses).toContain(503);
    expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
    for (const h of HOSTS) {
      expect(restartsIn(agents[h.name] as AgentProc), h.name).toBe((before[h.name] as number) + 1);
    }
    await expectNodesOkAndUncordoned(server.url, ADMIN, HOSTS, ids, dirs);
    expect(server.child.exitCode).toBeNull();
  }, 200_000);
});
