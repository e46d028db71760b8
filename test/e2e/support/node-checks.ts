import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { type AgentProc, startAgent, waitForAgents } from "./agents.ts";
import { killNodeServices, type NodeHostDirs, nodeHostDirs, nodeHostEnv } from "./node-hosts.ts";
import { api, waitUntil } from "./processes.ts";

/** What the e2e tests read of a host record (`GET /v1/hosts/<id>`). */
export interface HostRecord {
  nodeStatus: string;
  clusterUuid: string | null;
  phases: { id: string; state: string }[];
}

/**
 * Every named host is `ok` with all its phases running (drain is stop-only) and no cordon
 * left behind (the drain phase's marker under the host root).
 */
export async function expectNodesOkAndUncordoned(
  serverUrl: string,
  token: string,
  hosts: readonly { name: string }[],
  ids: Record<string, string>,
  dirs: Record<string, NodeHostDirs>,
): Promise<void> {
  for (const h of hosts) {
    const host = (await api<HostRecord>(`${serverUrl}/v1/hosts/${ids[h.name]}`, token)).body;
    expect(host.nodeStatus, h.name).toBe("ok");
    expect(host.phases.filter((p) => p.state !== "running" && p.id !== "drain-pods")).toEqual([]);
    const marker = join((dirs[h.name] as NodeHostDirs).hostRoot, "var", "lib", "keelson", "cordoned-by-keelson");
    expect(existsSync(marker), `${h.name} left cordoned`).toBe(false);
  }
}

/**
 * One agent per host, each on a host directory of its own under `scratch` and its own loopback
 * address, registered with a fresh join token; resolves once every one is connected, filling
 * `agents`, `dirs` and `ids` (host name to node id) as the tests keep them.
 */
export async function startNodeAgents(parts: {
  serverUrl: string;
  token: string;
  projectId: string;
  hosts: readonly { name: string; ip: string }[];
  scratch: string;
  agents: Record<string, AgentProc>;
  dirs: Record<string, NodeHostDirs>;
  ids: Record<string, string>;
  /** The URL a host's agent dials (a proxy in front of the server, say); the server's by default. */
  controlPlaneFor?: (host: { name: string }) => string;
}): Promise<void> {
  for (const h of parts.hosts) {
    const joinToken = await api<{ token: string }>(
      `${parts.serverUrl}/v1/projects/${parts.projectId}/joinTokens`,
      parts.token,
      { method: "POST", body: {} },
    );
    parts.dirs[h.name] = nodeHostDirs(join(parts.scratch, h.name));
    parts.agents[h.name] = await startAgent({
      name: h.name,
      controlPlane: parts.controlPlaneFor?.(h) ?? parts.serverUrl,
      joinToken: joinToken.body.token,
      stateDir: join(parts.scratch, h.name, "state"),
      env: nodeHostEnv(parts.dirs[h.name] as NodeHostDirs, h.ip),
    });
  }
  await waitForAgents(
    parts.serverUrl,
    parts.projectId,
    parts.token,
    parts.hosts.map((h) => h.name),
    parts.ids,
  );
}

/**
 * Ends a test's hosts: agents (SIGTERM), then the server, then the services the phases left
 * running (they outlive their agent by design, like systemd units), then the scratch dir.
 */
export async function tearDownHosts(parts: {
  agents: Record<string, { stop(signal: NodeJS.Signals, timeoutMs: number): Promise<unknown> }>;
  server: { stop(): Promise<unknown> } | undefined;
  dirs: Record<string, NodeHostDirs>;
  scratch: string;
}): Promise<void> {
  await Promise.all(Object.values(parts.agents).map((a) => a.stop("SIGTERM", 10_000)));
  await parts.server?.stop();
  for (const d of Object.values(parts.dirs)) killNodeServices(d);
  rmSync(parts.scratch, { recursive: true, force: true });
}

/** Creates a cluster, attaches the hosts and waits until it is ok with its workers healthy. */
export async function buildCluster(
  serverUrl: string,
  token: string,
  projectId: string,
  body: Record<string, unknown>,
  members: { uuid: string; isMaster: boolean }[],
  timeoutMs = 120_000,
): Promise<string> {
  const created = await api<{ uuid: string }>(`${serverUrl}/v4/${projectId}/clusters`, token, { method: "POST", body });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const clusterId = created.body.uuid;
  const res = await api(`${serverUrl}/v4/${projectId}/clusters/${clusterId}/attach`, token, {
    method: "POST",
    body: members,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  await waitUntil(
    "cluster ok",
    async () => {
      const c = (await api<Record<string, unknown>>(`${serverUrl}/v3/${projectId}/clusters/${clusterId}`, token)).body;
      return c.taskStatus === "success" && c.status === "ok" && c.workerStatus === "healthy";
    },
    timeoutMs,
    500,
  );
  return clusterId;
}
