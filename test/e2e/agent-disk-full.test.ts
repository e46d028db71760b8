import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProc, startAgent, waitForAgents } from "./support/agents.ts";
import { type HostRecord, tearDownHosts } from "./support/node-checks.ts";
import { type NodeHostDirs, nodeHostDirs, nodeHostEnv } from "./support/node-hosts.ts";
import { api, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";
import { mountTmpfs, type Tmpfs } from "./support/tmpfs.ts";

/**
 * A node's agent with its state dir on a 2 MiB tmpfs, filled for real while the node runs: the
 * agent keeps its link, its host record shows `state_dir_full`, it still answers commands
 * (whose record it cannot save), leaves no temp file behind, and does not restart the node's
 * phases. Once the filler is gone the condition clears by itself.
 */

const ADMIN = "e2e-admin-token";
const MASTER = { name: "master-71", ip: "127.0.0.71", isMaster: true } as const;
const FACTS_INTERVAL_MS = 500;

const occurrences = (agent: AgentProc, msg: string) => agent.output().split(`"msg":"${msg}"`).length - 1;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

interface Host extends HostRecord {
  conditions: { code: string; message: string; since: string }[];
  info: { responding: boolean };
  phases: { id: string; state: string; startedAt: string | null }[];
}

describe("an agent whose state dir's disk is full", () => {
  let server: ServerProc;
  let disk: Tmpfs;
  let projectId: string;
  const scratch = tempDir("keelson-e2e-agent-disk-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const agent = () => agents[MASTER.name] as AgentProc;
  const host = async () => (await api<Host>(`${server.url}/v1/hosts/${ids[MASTER.name]}`, ADMIN)).body;

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    disk = mountTmpfs("2m");
    const joinToken = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/joinTokens`, ADMIN, {
      method: "POST",
      body: {},
    });
    dirs[MASTER.name] = nodeHostDirs(join(scratch, MASTER.name));
    agents[MASTER.name] = await startAgent({
      name: MASTER.name,
      controlPlane: server.url,
      joinToken: joinToken.body.token,
      stateDir: join(disk.dir, "state"),
      env: nodeHostEnv(dirs[MASTER.name] as NodeHostDirs, MASTER.ip, {
        KEELSON_AGENT_FACTS_INTERVAL_MS: String(FACTS_INTERVAL_MS),
      }),
    });
    await waitForAgents(server.url, projectId, ADMIN, [MASTER.name], ids);
    await waitUntil("its link up", async () => (await host()).info.responding, 60_000);
  }, 150_000);

  afterAll(async () => {
    await tearDownHosts({ agents, server, dirs, scratch });
    disk?.remove();
  }, 60_000);

  it("keeps its link and its node's phases, reports state_dir_full, leaves no temp file, and clears once space returns", async () => {
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: { name: "e2e-agent-disk", containersCidr: "10.70.0.0/16", servicesCidr: "10.71.0.0/16" },
    });
    expect(created.status).toBe(200);
    const clusterUrl = `${server.url}/v3/${projectId}/clusters/${created.body.uuid}`;
    const attached = await api(`${clusterUrl.replace("/v3/", "/v4/")}/attach`, ADMIN, {
      method: "POST",
      body: [{ uuid: ids[MASTER.name], isMaster: true }],
    });
    expect(attached.status, JSON.stringify(attached.body)).toBe(200);
    await waitUntil(
      "cluster ok",
      async () => {
        const c = (await api<{ status: string; taskStatus: string }>(clusterUrl, ADMIN)).body;
        return c.taskStatus === "success" && c.status === "ok";
      },
      120_000,
      250,
    );
    const before = await host();
    expect(before).toMatchObject({ nodeStatus: "ok", conditions: [] });
    const startedAt = Object.fromEntries(before.phases.map((p) => [p.id, p.startedAt]));
    const counts = () => ({
      phaseStarts: occurrences(agent(), "phase start done"),
      restarts: occurrences(agent(), "restarting node phases"),
      linkLost: occurrences(agent(), "link closed; reconnecting"),
    });
    const was = counts();

    disk.fill();
    // A command while full: it runs and answers, though its record cannot be saved.
    const ping = await api<{ hosts: number; ok: number }>(`${server.url}/v1/agents/ping`, ADMIN, {
      method: "POST",
      body: { timeoutMs: 5_000 },
    });
    expect(ping.body).toMatchObject({ hosts: 1, ok: 1 });
    const full = await waitUntil(
      "the host record showing state_dir_full",
      async () => {
        const h = await host();
        return h.conditions.length > 0 ? h : undefined;
      },
      15_000,
      100,
    );
    expect(full.conditions).toEqual([
      {
        code: "state_dir_full",
        message: `the agent's state dir ${join(disk.dir, "state")} is full: state files keep their last content until space is freed there`,
        since: expect.any(String),
      },
    ]);
    // The command's record was refused for space (and the refusal raised the condition). The log
    // line reaches us through a pipe, which may lag the condition seen through the API: wait for it.
    const refusal = "the state dir is full; state files keep their last content";
    await waitUntil("the refusal logged", async () => occurrences(agent(), refusal) > 0, 5_000, 100);
    expect(occurrences(agent(), refusal)).toBe(1);
    // A few node checks and facts ticks on the full disk.
    await sleep(5_000);
    const during = await host();
    expect(during.info.responding).toBe(true);
    expect(during.nodeStatus).toBe("ok");
    expect(Object.fromEntries(during.phases.map((p) => [p.id, p.startedAt]))).toEqual(startedAt);
    expect(counts()).toEqual(was);
    const stateDir = join(disk.dir, "state");
    expect(filesUnder(stateDir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    // Every state file is whole (the last content written before the disk filled).
    for (const f of filesUnder(stateDir).filter((name) => name.endsWith(".json"))) {
      expect(() => JSON.parse(readFileSync(join(stateDir, f), "utf8")), f).not.toThrow();
    }

    disk.unfill();
    await waitUntil("the condition cleared", async () => (await host()).conditions.length === 0, 15_000, 100);
    expect(counts()).toEqual(was);
    expect((await host()).nodeStatus).toBe("ok");
  }, 240_000);
});
