import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProc, startAgent } from "./support/agents.ts";
import { killNodeServices, type NodeHostDirs, nodeHostDirs, nodeHostEnv } from "./support/node-hosts.ts";
import { api, freePort, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * A rolling restart of three real agents (one master, two workers; the test node package)
 * survives keelson-server being killed with SIGKILL in the middle: a new server on the same
 * data dir and port resumes the operation; every node was restarted exactly once (the agents'
 * own "restarting node phases" log lines), and every node ends ok, its phases running and not
 * cordoned.
 */

const ADMIN = "e2e-admin-token";
const HOSTS = [
  { name: "master-41", ip: "127.0.0.41", isMaster: true },
  { name: "worker-42", ip: "127.0.0.42", isMaster: false },
  { name: "worker-43", ip: "127.0.0.43", isMaster: false },
] as const;

interface HostRecord {
  nodeStatus: string;
  clusterUuid: string | null;
  phases: { id: string; state: string }[];
}

const restartsIn = (agent: AgentProc) => agent.output().split('"msg":"restarting node phases"').length - 1;

describe("rolling restart of real agents across a SIGKILL of the control plane", () => {
  let server: ServerProc;
  let port: number;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-rollout-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const env = { KEELSON_AGENT_HEARTBEAT_MS: "2000" };

  beforeAll(async () => {
    port = await freePort();
    server = await startServer({ adminToken: ADMIN, port, env });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    for (const h of HOSTS) {
      const joinToken = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/joinTokens`, ADMIN, {
        method: "POST",
        body: {},
      });
      dirs[h.name] = nodeHostDirs(join(scratch, h.name));
      agents[h.name] = await startAgent({
        name: h.name,
        controlPlane: server.url,
        joinToken: joinToken.body.token,
        stateDir: join(scratch, h.name, "state"),
        env: nodeHostEnv(dirs[h.name] as NodeHostDirs, h.ip),
      });
    }
    await waitUntil(
      "three agents connected",
      async () => {
        const res = await api<{ uuid: string; name: string; agentConnected: boolean }[]>(
          `${server.url}/v4/${projectId}/nodes`,
          ADMIN,
        );
        for (const n of res.body) ids[n.name] = n.uuid;
        return HOSTS.every((h) => res.body.some((n) => n.name === h.name && n.agentConnected));
      },
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    await Promise.all(Object.values(agents).map((a) => a.stop("SIGTERM", 10_000)));
    await server?.stop();
    for (const d of Object.values(dirs)) killNodeServices(d);
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  const cluster = async () =>
    (await api<Record<string, unknown>>(`${server.url}/v3/${projectId}/clusters/${clusterId}`, ADMIN)).body;

  it("builds a cluster of one master and two workers", async () => {
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: { name: "e2e-rollout", containersCidr: "10.40.0.0/16", servicesCidr: "10.41.0.0/16" },
    });
    expect(created.status).toBe(200);
    clusterId = created.body.uuid;
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/attach`, ADMIN, {
      method: "POST",
      body: HOSTS.map((h) => ({ uuid: ids[h.name], isMaster: h.isMaster })),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "cluster ok",
      async () => {
        const c = await cluster();
        return c.taskStatus === "success" && c.status === "ok" && c.workerStatus === "healthy";
      },
      180_000,
      500,
    );
  }, 200_000);

  it("resumes after SIGKILL: each node restarted exactly once, none left stopped or cordoned", async () => {
    const res = await api(`${server.url}/v3/${projectId}/clusters/${clusterId}/restart?batchPercent=50`, ADMIN, {
      method: "POST",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // Kill the control plane once the master is done and the first worker is restarting.
    const firstWorker = [...HOSTS]
      .filter((h) => !h.isMaster)
      .sort((a, b) => a.name.localeCompare(b.name))[0] as (typeof HOSTS)[number];
    await waitUntil(
      "the first worker restarting",
      async () => restartsIn(agents[firstWorker.name] as AgentProc) === 1,
      120_000,
      50,
    );
    await server.stop("SIGKILL");
    server = await startServer({ adminToken: ADMIN, port, env, dataDir: server.dataDir });

    await waitUntil(
      "the restart operation finished",
      async () => {
        const ops = await api<{ kind: string; state: string; error: string | null }[]>(
          `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
          ADMIN,
        );
        const op = ops.body[0];
        if (op?.state === "failed") throw new Error(`restart failed: ${op.error}`);
        return op?.kind === "cluster.restart" && op.state === "succeeded";
      },
      180_000,
      500,
    );
    for (const h of HOSTS) expect(restartsIn(agents[h.name] as AgentProc), h.name).toBe(1);
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
    for (const h of HOSTS) {
      const host = (await api<HostRecord>(`${server.url}/v1/hosts/${ids[h.name]}`, ADMIN)).body;
      expect(host.nodeStatus, h.name).toBe("ok");
      expect(host.phases.filter((p) => p.state !== "running" && p.id !== "drain-pods")).toEqual([]);
      const marker = join((dirs[h.name] as NodeHostDirs).hostRoot, "var", "lib", "keelson", "cordoned-by-keelson");
      expect(existsSync(marker), `${h.name} left cordoned`).toBe(false);
    }
  }, 300_000);
});
