import { afterAll, describe, expect, it } from "vitest";
import { type SimAgent, type Simulator, startSimulator } from "../sim/index.ts";
import { api, logRecords, type Proc, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.ts";

/**
 * Issue 17, on PostgreSQL only (the e2e project leaves it out: SQLite serves one replica): the
 * replica that owns a rolling restart is stopped with SIGSTOP for longer than its lease, in the
 * middle of a batch. The other replica takes the operation over and finishes it; the simulated
 * agents move to it through a TCP proxy standing for the load balancer whose /readyz check drops
 * the paused replica. Resumed with SIGCONT, the former owner changes nothing: it logs its claim
 * lost, the record stays the new owner's, and every node was restarted exactly once (the agents'
 * own counters: a command sent again under its id is answered from the agent's record).
 */

const ADMIN = "e2e-admin-token";
// Short leases so that the pause outlasts one by far: renewal 300 ms, the owner fences itself
// after 1.2 s without one, another replica may claim after 2 s (by the database's clock).
const LEASES = {
  KEELSON_OPERATION_LEASE_MS: "2000",
  KEELSON_OPERATION_LEASE_RENEW_MS: "300",
  KEELSON_OPERATION_LEASE_DEADLINE_MS: "1200",
};

interface Replica {
  id: string;
  live: boolean;
  agentsHeld: number;
  operationsOwned: number;
}

interface Operation {
  uuid: string;
  kind: string;
  state: string;
  step: number;
  attempts: number;
  replica: string | null;
  finishedAt: string | null;
}

const procs: Proc[] = [];
let sim: Simulator | undefined;
let proxy: TcpProxy | undefined;
afterAll(async () => {
  await sim?.stop();
  await proxy?.close();
  for (const p of procs) {
    signalGroup(p, "SIGCONT");
    await p.stop("SIGKILL");
  }
});

/** SIGSTOP / SIGCONT to the server's whole process group (npx, its shell and keelson-server). */
function signalGroup(p: Proc, signal: "SIGSTOP" | "SIGCONT"): void {
  try {
    process.kill(-(p.child.pid as number), signal);
  } catch {
    // already gone
  }
}

async function replica(dataDir: string, id: string): Promise<ServerProc> {
  // Info level: the former owner's refused writes are logged at warn/error, the takeover at info.
  const s = await startServer({ dataDir, env: { KEELSON_REPLICA_ID: id, KEELSON_LOG_LEVEL: "info", ...LEASES } });
  procs.push(s);
  return s;
}

describe("the owner of an operation paused longer than its lease", () => {
  it("SIGSTOP then SIGCONT: the other replica finishes it, the woken owner changes nothing, no node restarts twice", async () => {
    const dataDir = tempDir("keelson-e2e-replica-paused-");
    const a = await replica(dataDir, "cp-a");
    const portOf = (s: ServerProc) => Number(new URL(s.url).port);
    // The agents' one address: forwards to A now, to B once A is paused (the load balancer).
    const target = { host: "127.0.0.1", port: portOf(a) };
    proxy = await startTcpProxy(target);
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${a.url}/v1/projects`, ADMIN);
    const projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    sim = await startSimulator({
      url: proxy.url,
      count: 3,
      adminToken: ADMIN,
      projectId,
      namePrefix: "paused",
      phaseTimeMs: 50,
    });
    const [master, ...workers] = sim.agents as [SimAgent, ...SimAgent[]];

    const created = await api<{ uuid: string }>(`${a.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: { name: "paused" },
    });
    expect(created.status).toBe(200);
    const clusterId = created.body.uuid;
    const attach = await api(`${a.url}/v4/${projectId}/clusters/${clusterId}/attach`, ADMIN, {
      method: "POST",
      body: [{ uuid: master.hostId, isMaster: true }, ...workers.map((w) => ({ uuid: w.hostId, isMaster: false }))],
    });
    expect(attach.status, JSON.stringify(attach.body)).toBe(200);
    const clusterOn = async (s: ServerProc) =>
      (await api<{ status: string; taskStatus: string }>(`${s.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN)).body;
    await waitUntil(
      "the cluster ready",
      async () => {
        const c = await clusterOn(a);
        return c.status === "ok" && c.taskStatus === "success";
      },
      60_000,
    );

    // The second replica joins only now: the nodes' reports reach the replica holding their
    // links, so the cluster is built where the agents are linked.
    const b = await replica(dataDir, "cp-b");
    // Worker batches of one: the first worker's restart hangs until the test lets it go.
    const sorted = [...workers].sort((x, y) => x.hostname.localeCompare(y.hostname));
    const slow = sorted[0] as SimAgent;
    slow.phaseTimeMs = 600_000;
    const restart = await api(`${a.url}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=34`, ADMIN, {
      method: "POST",
    });
    expect(restart.status, JSON.stringify(restart.body)).toBe(200);
    await waitUntil("the slow worker's restart", async () => slow.restarts === 1, 30_000);
    const listed = await api<Operation[]>(`${a.url}/v4/${projectId}/operations?target=${clusterId}`, ADMIN);
    const op = listed.body.find((o) => o.kind === "cluster.restart") as Operation;
    expect(op).toMatchObject({ state: "running", replica: "cp-a" });
    const opOn = async (s: ServerProc) => (await api<Operation>(`${s.url}/v1/operations/${op.uuid}`, ADMIN)).body;

    let done: Operation;
    try {
      signalGroup(a, "SIGSTOP");
      // The load balancer's /readyz check fails for A: new links go to B, A's are cut.
      target.port = portOf(b);
      proxy.cut();
      await waitUntil("the agents linked to B", async () => sim?.connectedCount() === 3, 30_000);
      slow.phaseTimeMs = 0;
      slow.setFailPhase(undefined);
      done = await waitUntil(
        `B finished the restart\n${b.output().slice(-4000)}`,
        async () => {
          const o = await opOn(b);
          return o.state === "succeeded" ? o : undefined;
        },
        60_000,
      );
      expect(done.replica).toBe("cp-b");
      expect(sim.agents.map((x) => x.restarts)).toEqual([1, 1, 1]);
    } finally {
      signalGroup(a, "SIGCONT");
    }

    // Woken, A fences itself (no renewal for longer than its deadline) before it acts on
    // anything, drops the operation and stops its step work; then renews again holding nothing.
    const ownerSays = (msg: string) => logRecords(a).find((r) => r.msg === msg && (r.operation ?? op.uuid) === op.uuid);
    await waitUntil(
      `A renews again\n${a.output().slice(-4000)}`,
      async () => ownerSays("leases renew again; acting again"),
      15_000,
    );
    expect(
      ownerSays("leases not renewed before their deadline; this replica stops acting on its operations"),
    ).toMatchObject({
      operations: [op.uuid],
    });
    expect(ownerSays("operation dropped: its lease could not be renewed in time")).toBeDefined();
    expect(ownerSays("operation stopped: lease lost")).toBeDefined();
    expect(ownerSays("operation failed")).toBeUndefined();
    // Nothing A did after waking shows: the record is B's and unchanged (state, step, attempts:
    // one claim by A, one by B), the links B took stay B's, and no node restarted again.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await opOn(a)).toEqual(done);
    expect(done).toMatchObject({ state: "succeeded", replica: "cp-b", attempts: 2 });
    expect(sim.agents.map((x) => x.restarts)).toEqual([1, 1, 1]);
    expect(sim.connectedCount()).toBe(3);
    const replicas = (await api<Replica[]>(`${b.url}/v1/replicas`, ADMIN)).body;
    expect(replicas.map((r) => [r.id, r.live, r.operationsOwned])).toEqual([
      ["cp-a", true, 0],
      ["cp-b", true, 0],
    ]);
    expect(replicas.find((r) => r.id === "cp-b")?.agentsHeld).toBe(3);
    expect(await clusterOn(a)).toMatchObject({ status: "ok", taskStatus: "success" });
    expect((await fetch(`${a.url}/readyz`)).status).toBe(200);
    expect(await b.stop()).toBe(0);
    expect(await a.stop()).toBe(0);
  });
});
