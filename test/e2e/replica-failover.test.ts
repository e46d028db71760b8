import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentProc } from "./support/agents.ts";
import { buildCluster, expectNodesOkAndUncordoned, startNodeAgents, tearDownHosts } from "./support/node-checks.ts";
import type { NodeHostDirs } from "./support/node-hosts.ts";
import { api, freePort, type Proc, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * Issue 17, on PostgreSQL only (the e2e project leaves it out: SQLite serves one replica): two
 * keelson-server replicas on one database and three real agents (a master, two workers) whose
 * KEELSON_CONTROL_PLANE lists both replicas. A rolling restart runs on replica A; while a worker
 * is restarting, A is killed with SIGKILL. Replica B takes the operation over within lease plus
 * one renewal, every agent links to B, B's API answers throughout, B's event stream reports the
 * operation's end, and every node was restarted exactly once (the agents' own "restarting node
 * phases" log lines: a command B sends again under its id is answered from the agent's record).
 *
 * In this tree node reports reach only the replica holding the agent's link ("events
 * everywhere" is not built), so the owner before the kill must be the replica the agents are
 * linked to: B starts after the cluster is built (the agents, linked to A, stay there), and B is
 * held with SIGSTOP while A records and claims the restart, so B cannot claim it first.
 */

const ADMIN = "e2e-admin-token";
// Short leases: renewal 300 ms; an owner fences itself after 1.5 s without one; another replica
// may claim 3 s after the owner's last renewal (by the database's clock).
const LEASE_MS = 3_000;
const RENEW_MS = 300;
const LEASES = {
  KEELSON_OPERATION_LEASE_MS: String(LEASE_MS),
  KEELSON_OPERATION_LEASE_RENEW_MS: String(RENEW_MS),
  KEELSON_OPERATION_LEASE_DEADLINE_MS: "1500",
};
/** What observing a claim adds here: the claim's statement, the event's way to the stream, a loaded machine. */
const OBSERVATION_SLACK_MS = 700;
const HOSTS = [
  { name: "master-71", ip: "127.0.0.71", isMaster: true },
  { name: "worker-72", ip: "127.0.0.72", isMaster: false },
  { name: "worker-73", ip: "127.0.0.73", isMaster: false },
] as const;
const restartsIn = (agent: AgentProc) => agent.output().split('"msg":"restarting node phases"').length - 1;

interface Operation {
  uuid: string;
  kind: string;
  state: string;
  error: string | null;
  attempts: number;
  replica: string | null;
}
interface Replica {
  id: string;
  live: boolean;
  agentsHeld: number;
  operationsOwned: number;
}
interface StreamEvent {
  name: string;
  data: { operationId?: string; state?: string };
  at: number;
}

/** SIGSTOP / SIGCONT to a server's whole process group (npx, its shell and keelson-server). */
function signalGroup(p: Proc, signal: "SIGSTOP" | "SIGCONT"): void {
  try {
    process.kill(-(p.child.pid as number), signal);
  } catch {
    // already gone
  }
}

/** Follows `GET /v4/{project}/events` on a server, noting each event with its arrival time. */
function followEvents(url: string, projectId: string) {
  const events: StreamEvent[] = [];
  const abort = new AbortController();
  const done = (async () => {
    const res = await fetch(`${url}/v4/${projectId}/events`, {
      headers: { "x-auth-token": ADMIN },
      signal: abort.signal,
    });
    if (!res.ok || !res.body) throw new Error(`events stream: ${res.status}`);
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of res.body) {
      buffered += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const name = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (name && data) events.push({ name, data: JSON.parse(data), at: Date.now() });
      }
    }
  })().catch((err: unknown) => {
    if (!abort.signal.aborted) throw err;
  });
  return { events, stop: () => abort.abort(), done };
}

describe("the owner of a rolling restart killed with SIGKILL, real agents listing both replicas", () => {
  let a: ServerProc | undefined;
  let b: ServerProc | undefined;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-replica-failover-");
  const dataDir = tempDir("keelson-e2e-replica-failover-data-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  let portB: number;
  const env = (id: string) => ({
    KEELSON_REPLICA_ID: id,
    KEELSON_LOG_LEVEL: "info",
    KEELSON_AGENT_HEARTBEAT_MS: "2000",
    KEELSON_NODE_RESTART_TIMEOUT_MS: "60000",
    ...LEASES,
  });

  beforeAll(async () => {
    portB = await freePort();
    a = await startServer({ adminToken: ADMIN, dataDir, env: env("cp-a") });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${a.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    // Every agent lists both replicas; B does not run yet, so each links to A (after trying B
    // first when its random start picked it).
    const both = `${a.url},http://127.0.0.1:${portB}`;
    await startNodeAgents({
      serverUrl: a.url,
      token: ADMIN,
      projectId,
      hosts: HOSTS,
      scratch,
      agents,
      dirs,
      ids,
      controlPlaneFor: () => both,
    });
  }, 120_000);

  afterAll(async () => {
    for (const s of [a, b]) if (s) signalGroup(s, "SIGCONT");
    await tearDownHosts({
      agents,
      server: { stop: async () => Promise.all([a?.stop("SIGKILL"), b?.stop("SIGKILL")]) },
      dirs,
      scratch,
    });
  }, 60_000);

  it("builds a cluster of one master and two workers on replica A", async () => {
    clusterId = await buildCluster(
      (a as ServerProc).url,
      ADMIN,
      projectId,
      { name: "e2e-failover", containersCidr: "10.70.0.0/16", servicesCidr: "10.71.0.0/16" },
      HOSTS.map((h) => ({ uuid: ids[h.name] as string, isMaster: h.isMaster })),
      180_000,
    );
  }, 200_000);

  it("B takes the restart over within lease + one renewal; every agent links to B; B answers throughout; each node restarted once", async () => {
    const ownerA = a as ServerProc;
    const replicaB = await startServer({ adminToken: ADMIN, dataDir, port: portB, env: env("cp-b") });
    b = replicaB;
    const stream = followEvents(replicaB.url, projectId);

    // B held while A records and claims the restart (see the header).
    signalGroup(replicaB, "SIGSTOP");
    let op: Operation;
    try {
      const res = await api(`${ownerA.url}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=50`, ADMIN, {
        method: "POST",
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      op = await waitUntil(
        "A claims the restart",
        async () => {
          const ops = await api<Operation[]>(`${ownerA.url}/v4/${projectId}/operations?target=${clusterId}`, ADMIN);
          const found = ops.body.find((o) => o.kind === "cluster.restart");
          return found?.replica ? found : undefined;
        },
        10_000,
        20,
      );
    } finally {
      signalGroup(replicaB, "SIGCONT");
    }
    expect(op).toMatchObject({ state: "running", replica: "cp-a", attempts: 1 });
    const firstWorker = agents["worker-72"] as AgentProc;
    await waitUntil("the first worker restarting", async () => restartsIn(firstWorker) === 1, 120_000, 20);

    // Clients keep asking B while A dies.
    const statuses: number[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const r = await fetch(`${replicaB.url}/v3/${projectId}/clusters/${clusterId}`, {
          headers: { "x-auth-token": ADMIN },
        });
        statuses.push(r.status);
        await r.arrayBuffer();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    const killedAt = Date.now();
    await ownerA.stop("SIGKILL");
    const linked = await waitUntil(
      "every agent linked to B",
      async () => {
        const list = (await api<Replica[]>(`${replicaB.url}/v1/replicas`, ADMIN)).body;
        return list.find((r) => r.id === "cp-b")?.agentsHeld === HOSTS.length ? Date.now() : undefined;
      },
      30_000,
      50,
    );
    const claimed = await waitUntil(
      `B claims the restart\n${replicaB.output().slice(-3000)}`,
      async () => stream.events.find((e) => e.name === "operation.started" && e.data.operationId === op.uuid)?.at,
      30_000,
      20,
    );
    const done = await waitUntil(
      "the restart finished on B",
      async () => {
        const o = (await api<Operation>(`${replicaB.url}/v1/operations/${op.uuid}`, ADMIN)).body;
        if (o.state === "failed") throw new Error(`restart failed: ${o.error}`);
        return o.state === "succeeded" ? o : undefined;
      },
      180_000,
      250,
    );
    polling = false;
    await poll;
    const takeover = claimed - killedAt;
    process.stderr.write(
      `[failover] SIGKILL → every agent on B ${linked - killedAt} ms, → B claims the operation ${takeover} ms (lease ${LEASE_MS} ms, renewal ${RENEW_MS} ms)\n`,
    );
    expect(takeover).toBeLessThanOrEqual(LEASE_MS + RENEW_MS + OBSERVATION_SLACK_MS);
    expect(done).toMatchObject({ state: "succeeded", replica: "cp-b", attempts: 2 });
    for (const h of HOSTS) expect(restartsIn(agents[h.name] as AgentProc), h.name).toBe(1);
    // Every agent moved on from the dead replica by itself.
    for (const h of HOSTS) expect((agents[h.name] as AgentProc).output()).toContain("moving to the next control plane");
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    await waitUntil(
      "B's stream reports the end",
      async () =>
        stream.events.some(
          (e) => e.name === "operation.finished" && e.data.operationId === op.uuid && e.data.state === "succeeded",
        ),
      10_000,
    );
    stream.stop();
    await stream.done;
    const replicas = (await api<Replica[]>(`${replicaB.url}/v1/replicas`, ADMIN)).body;
    expect(replicas.map((r) => [r.id, r.live, r.operationsOwned])).toEqual([
      ["cp-a", false, 0],
      ["cp-b", true, 0],
    ]);
    await expectNodesOkAndUncordoned(replicaB.url, ADMIN, HOSTS, ids, dirs);
  }, 300_000);
});
