import type { AddressInfo } from "node:net";
import { clusters, nodes, operations } from "@keelson/db";
import type { CommandName, CommandPayload } from "@keelson/protocol";
import { asc, eq } from "drizzle-orm";
import type { SimAgent, Simulator, SimulatorOptions } from "../../../test/sim/index.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

/**
 * A control plane listening on 127.0.0.1 with a fleet of simulated agents (test/sim) connected
 * over real WebSockets: what attach/detach tests run against. Commands the hub sends are
 * recorded (name, host, payload, time) so tests can check order and payloads.
 */

export interface SentCommand {
  hostId: string;
  name: CommandName;
  payload: unknown;
  at: number;
}

export interface Fleet {
  t: TestApp;
  base: string;
  sim: Simulator;
  sent: SentCommand[];
  /** The n-th simulated agent (0-based). */
  agent(i: number): SimAgent;
  id(i: number): string;
  createCluster(name: string, body?: Record<string, unknown>): Promise<string>;
  attach(clusterId: string, entries: { uuid: string; isMaster: boolean }[], version?: string): Promise<Response>;
  detach(clusterId: string, entries: { uuid: string; isMaster: boolean }[], version?: string): Promise<Response>;
  cluster(clusterId: string, version?: string): Promise<Record<string, unknown>>;
  node(hostId: string, version?: string): Promise<Record<string, unknown>>;
  /** Waits until every operation has settled. */
  idle(): Promise<void>;
  latestOperation(clusterId: string): Promise<typeof operations.$inferSelect>;
  /** Table contents a rejected request must leave exactly as they were. */
  snapshot(): Promise<unknown>;
  joinsTo(hostId: string): SentCommand[];
  close(): Promise<void>;
}

interface Response {
  statusCode: number;
  body: string;
  json(): Record<string, unknown>;
}

export async function startFleet(
  count: number,
  options: Partial<SimulatorOptions> & { dataDir?: string; port?: number } = {},
): Promise<Fleet> {
  const { startSimulator } = await import("../../../test/sim/index.ts");
  const t = await createTestApp({
    runOperations: true,
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    agentHub: { presence: { flushDelayMs: 5 } },
  });
  await t.app.listen({ host: "127.0.0.1", port: options.port ?? 0 });
  const { port } = t.app.server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  const sent = recordCommands(t);
  const { dataDir: _d, port: _p, ...simOptions } = options;
  const sim = await startSimulator({
    url: base,
    adminToken: ADMIN_TOKEN,
    projectId: t.projectId,
    count,
    ...simOptions,
  });
  return fleetOf(t, base, sim, sent);
}

/** Wraps the hub's sendCommand to record what goes to which host, in order. */
export function recordCommands(t: TestApp): SentCommand[] {
  const sent: SentCommand[] = [];
  const hub = t.app.keelson.agents;
  const original = hub.sendCommand.bind(hub);
  hub.sendCommand = (<N extends CommandName>(
    hostId: string,
    name: N,
    payload: CommandPayload<N>,
    opts?: { timeoutMs?: number },
  ) => {
    sent.push({ hostId, name, payload, at: Date.now() });
    return original(hostId, name, payload, opts);
  }) as typeof hub.sendCommand;
  return sent;
}

export function fleetOf(t: TestApp, base: string, sim: Simulator, sent: SentCommand[]): Fleet {
  const req = async (method: "GET" | "POST" | "PUT" | "DELETE", url: string, payload?: unknown) =>
    (await t.request({ method, url, ...(payload === undefined ? {} : { payload: payload as object }) })) as Response;
  return {
    t,
    base,
    sim,
    sent,
    agent: (i) => sim.agents[i] as SimAgent,
    id: (i) => (sim.agents[i] as SimAgent).hostId,
    async createCluster(name, body = {}) {
      const res = await req("POST", `/v4/${t.projectId}/clusters`, { name, ...body });
      if (res.statusCode !== 200) throw new Error(`create ${name}: ${res.statusCode} ${res.body}`);
      return res.json().uuid as string;
    },
    attach: (clusterId, entries, version = "v4") =>
      req("POST", `/${version}/${t.projectId}/clusters/${clusterId}/attach`, entries),
    detach: (clusterId, entries, version = "v4") =>
      req("POST", `/${version}/${t.projectId}/clusters/${clusterId}/detach`, entries),
    async cluster(clusterId, version = "v4") {
      const res = await req("GET", `/${version}/${t.projectId}/clusters/${clusterId}`);
      if (res.statusCode !== 200) throw new Error(`GET cluster: ${res.statusCode} ${res.body}`);
      return res.json();
    },
    async node(hostId, version = "v4") {
      const res = await req("GET", `/${version}/${t.projectId}/nodes/${hostId}`);
      if (res.statusCode !== 200) throw new Error(`GET node: ${res.statusCode} ${res.body}`);
      return res.json();
    },
    idle: () => t.app.keelson.runner.idle(),
    async latestOperation(clusterId) {
      const ops = await t.db
        .select()
        .from(operations)
        .where(eq(operations.targetId, clusterId))
        .orderBy(asc(operations.createdAt));
      const last = ops.at(-1);
      if (!last) throw new Error(`no operation on ${clusterId}`);
      return last;
    },
    snapshot: async () => ({
      nodes: await t.db
        .select({ id: nodes.id, clusterId: nodes.clusterId, isMaster: nodes.isMaster, status: nodes.status })
        .from(nodes)
        .orderBy(asc(nodes.id)),
      clusters: await t.db
        .select({
          id: clusters.id,
          status: clusters.status,
          taskStatus: clusters.taskStatus,
          lastOp: clusters.lastOp,
          taskError: clusters.taskError,
        })
        .from(clusters)
        .orderBy(asc(clusters.id)),
      operations: (await t.db.select({ id: operations.id }).from(operations)).length,
    }),
    joinsTo: (hostId) => sent.filter((c) => c.hostId === hostId && c.name === "node.join"),
    async close() {
      await sim.stop();
      await t.close();
    },
  };
}

export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const m = (uuid: string) => ({ uuid, isMaster: true });
export const w = (uuid: string) => ({ uuid, isMaster: false });
