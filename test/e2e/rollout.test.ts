import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProc, startAgent, waitForAgents } from "./support/agents.ts";
import { buildCluster, expectNodesOkAndUncordoned, type HostRecord, tearDownHosts } from "./support/node-checks.ts";
import { liveServicePids, type NodeHostDirs, nodeHostDirs, nodeHostEnv } from "./support/node-hosts.ts";
import { uploadNodePackages } from "./support/node-packages.ts";
import { api, freePort, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * A rolling restart of three real agents (one master, two workers; the test node package)
 * survives keelson-server being killed with SIGKILL in the middle: a new server on the same
 * data dir and port resumes the operation; every node was restarted exactly once (the agents'
 * own "restarting node phases" log lines), and every node ends ok, its phases running and not
 * cordoned. The same across a SIGKILL in the middle of an upgrade (every node upgraded exactly
 * once, the cluster at the target version, and every node's services running the binaries of
 * the target's node package, served by the control plane). A worker whose agent (launcher and agent) is
 * killed with SIGKILL in the middle of its restart: started again on the same state dir, it
 * reports the lost command as interrupted and the operation fails naming the node; left away,
 * the operation fails at the node timeout naming the node. Either way no further node is
 * touched and a new request completes.
 */

const ADMIN = "e2e-admin-token";
const HOSTS = [
  { name: "master-41", ip: "127.0.0.41", isMaster: true },
  { name: "worker-42", ip: "127.0.0.42", isMaster: false },
  { name: "worker-43", ip: "127.0.0.43", isMaster: false },
] as const;
const names = HOSTS.map((h) => h.name);

const FROM = "1.30.6-kls.1";
const PATCH = "1.30.8-kls.1";

/**
 * The role version of the node package a service runs from: its process's command line names
 * `<state dir>/node-packages/<roleVersion>-<sha>/…` (the test package's wrappers exec node on
 * the package's lib/ script).
 */
function packageOf(dirs: NodeHostDirs, service: string): string | undefined {
  const pid = liveServicePids(dirs)[service];
  if (!pid) return undefined;
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  return /node-packages\/(\d+\.\d+\.\d+-kls\.\d+)-[0-9a-f]+\//.exec(cmdline)?.[1];
}

/** The Kubernetes services a master runs from its node package. */
const MASTER_SERVICES = ["kubelet", "kube-proxy", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];
const restartsIn = (agent: AgentProc) => agent.output().split('"msg":"restarting node phases"').length - 1;
const upgradesIn = (agent: AgentProc) => agent.output().split('"msg":"upgrading node"').length - 1;

describe("rolling restart of real agents across a SIGKILL of the control plane", () => {
  let server: ServerProc;
  let port: number;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-rollout-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  // A node gets 60 s to come back: long enough for a restart here, short enough to fail clearly.
  const env = { KEELSON_AGENT_HEARTBEAT_MS: "2000", KEELSON_NODE_RESTART_TIMEOUT_MS: "60000" };
  const joinTokens: Record<string, string> = {};

  beforeAll(async () => {
    port = await freePort();
    server = await startServer({ adminToken: ADMIN, port, env });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    // The node packages of both versions, built from the test package as `pnpm pack:node` does
    // and uploaded: nodes run the one of their cluster's version, downloaded from the server.
    await uploadNodePackages(server.url, ADMIN, join(scratch, "packages"), [
      [FROM, "v1.30.6-keelson-standin"],
      [PATCH, "v1.30.8-keelson-standin"],
    ]);
    for (const h of HOSTS) {
      const joinToken = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/joinTokens`, ADMIN, {
        method: "POST",
        body: {},
      });
      dirs[h.name] = nodeHostDirs(join(scratch, h.name));
      joinTokens[h.name] = joinToken.body.token;
      agents[h.name] = await startAgent({
        name: h.name,
        controlPlane: server.url,
        joinToken: joinToken.body.token,
        stateDir: join(scratch, h.name, "state"),
        env: nodeHostEnv(dirs[h.name] as NodeHostDirs, h.ip),
      });
    }
    await waitForAgents(server.url, projectId, ADMIN, names, ids);
  }, 120_000);

  afterAll(() => tearDownHosts({ agents, server, dirs, scratch }), 60_000);

  const lastOperation = async (kind: string) => {
    const ops = await api<{ kind: string; state: string; error: string | null }[]>(
      `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
      ADMIN,
    );
    const op = ops.body[0];
    if (op?.kind !== kind) return undefined;
    return op;
  };
  const expectAllOkAndUncordoned = () => expectNodesOkAndUncordoned(server.url, ADMIN, HOSTS, ids, dirs);
  const firstWorker = [...HOSTS]
    .filter((h) => !h.isMaster)
    .sort((a, b) => a.name.localeCompare(b.name))[0] as (typeof HOSTS)[number];

  /** Asks for restartWorkers (half the workers per batch) and waits until `agent` logs its next restart. */
  const restartWorkersUntilRestarting = async (agent: AgentProc, restartsBefore: number) => {
    const res = await api(`${server.url}/v3/${projectId}/clusters/${clusterId}/restartWorkers?batchPercent=50`, ADMIN, {
      method: "POST",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil("the worker restarting", async () => restartsIn(agent) === restartsBefore + 1, 120_000, 20);
  };

  const cluster = async () =>
    (await api<Record<string, unknown>>(`${server.url}/v3/${projectId}/clusters/${clusterId}`, ADMIN)).body;

  it("builds a cluster of one master and two workers", async () => {
    clusterId = await buildCluster(
      server.url,
      ADMIN,
      projectId,
      // Not the newest role version: the upgrade below has a patch target.
      { name: "e2e-rollout", containersCidr: "10.40.0.0/16", servicesCidr: "10.41.0.0/16", kubeRoleVersion: FROM },
      HOSTS.map((h) => ({ uuid: ids[h.name] as string, isMaster: h.isMaster })),
      180_000,
    );
    for (const h of HOSTS) {
      const services = h.isMaster ? MASTER_SERVICES : ["kubelet", "kube-proxy"];
      for (const service of services) {
        expect(packageOf(dirs[h.name] as NodeHostDirs, service), `${h.name} ${service}`).toBe(FROM);
      }
    }
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
    await expectAllOkAndUncordoned();
  }, 300_000);

  it("resumes an upgrade after SIGKILL: each node upgraded exactly once, at the target, none cordoned", async () => {
    const before = Object.fromEntries(HOSTS.map((h) => [h.name, upgradesIn(agents[h.name] as AgentProc)]));
    const t0 = Date.now();
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/upgrade?type=patch`, ADMIN, {
      method: "POST",
      body: { batchUpgradePercent: 50 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "the first worker upgrading",
      async () => upgradesIn(agents[firstWorker.name] as AgentProc) === (before[firstWorker.name] as number) + 1,
      120_000,
      50,
    );
    await server.stop("SIGKILL");
    server = await startServer({ adminToken: ADMIN, port, env, dataDir: server.dataDir });
    await waitUntil(
      "the upgrade operation finished",
      async () => {
        const op = await lastOperation("cluster.upgrade");
        if (op?.state === "failed") throw new Error(`upgrade failed: ${op.error}`);
        return op?.state === "succeeded";
      },
      180_000,
      500,
    );
    process.stderr.write(`[rollout] upgrade across a SIGKILL took ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    for (const h of HOSTS) {
      expect(upgradesIn(agents[h.name] as AgentProc) - (before[h.name] as number), h.name).toBe(1);
    }
    expect(await cluster()).toMatchObject({
      status: "ok",
      taskStatus: "success",
      taskError: "",
      kubeRoleVersion: PATCH,
    });
    await expectAllOkAndUncordoned();
    // Each agent had the target's package installed (the upgrade's prefetch) before it upgraded.
    for (const h of HOSTS) {
      const lines = (agents[h.name] as AgentProc).output().split("\n");
      const installed = lines.findIndex(
        (l) => l.includes('"msg":"node package installed"') && l.includes(`"roleVersion":"${PATCH}"`),
      );
      const upgrading = lines.findIndex((l) => l.includes('"msg":"upgrading node"'));
      expect(installed, `${h.name} installed ${PATCH}`).toBeGreaterThanOrEqual(0);
      expect(installed, `${h.name} installed before upgrading`).toBeLessThan(upgrading);
    }
    // Every node now runs the binaries of the target's package, not the ones it joined with.
    for (const h of HOSTS) {
      const services = h.isMaster ? MASTER_SERVICES : ["kubelet", "kube-proxy"];
      for (const service of services) {
        expect(packageOf(dirs[h.name] as NodeHostDirs, service), `${h.name} ${service}`).toBe(PATCH);
      }
    }
  }, 300_000);

  it("a worker whose agent is killed mid-restart is waited for: the restart completes, nothing cordoned", async () => {
    const victim = firstWorker.name;
    const old = agents[victim] as AgentProc;
    const before = Object.fromEntries(HOSTS.map((h) => [h.name, restartsIn(agents[h.name] as AgentProc)]));
    const finished = () =>
      waitUntil(
        "the restartWorkers operation finished",
        async () => {
          const op = await lastOperation("cluster.restart");
          return op?.state === "succeeded" || op?.state === "failed" ? op : undefined;
        },
        120_000,
        250,
      );
    const t0 = Date.now();
    await restartWorkersUntilRestarting(old, before[victim] as number);
    // The launcher (npx) and the agent go together, as in a crash; the node's services stay.
    await old.stop("SIGKILL");
    await new Promise((r) => setTimeout(r, 2_000));
    const again = await startAgent({
      name: victim,
      controlPlane: server.url,
      joinToken: joinTokens[victim],
      stateDir: old.stateDir,
      env: nodeHostEnv(dirs[victim] as NodeHostDirs, firstWorker.ip),
    });
    agents[victim] = again;
    expect(again.hostId()).toBe(ids[victim]);
    // The agent that comes back reports the command it lost as interrupted; its node controller
    // brings the node's phases back by itself, and the rollout waits for it, then goes on.
    const op = await finished();
    const seconds = ((Date.now() - t0) / 1000).toFixed(1);
    process.stderr.write(`[rollout] restartWorkers with ${victim}'s agent killed: ${op.state} after ${seconds} s\n`);
    expect(op.error).toBeNull();
    expect(op.state).toBe("succeeded");
    expect(Date.now() - t0).toBeLessThan(60_000);
    // The other worker was restarted once, in the batch after the victim's; the master not at all.
    for (const h of HOSTS.filter((x) => x.name !== victim)) {
      const expected = h.isMaster ? 0 : 1;
      expect(restartsIn(agents[h.name] as AgentProc) - (before[h.name] as number), h.name).toBe(expected);
    }
    // The interrupted restart was asked again of the agent that came back, which ran it whole.
    expect(restartsIn(again)).toBe(1);
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
    await expectAllOkAndUncordoned();
  }, 300_000);

  it("a worker whose agent stays away fails the restart at the node timeout, naming it", async () => {
    // A server with a 15 s node timeout, on the same data dir and port.
    await server.stop();
    server = await startServer({
      adminToken: ADMIN,
      port,
      env: { ...env, KEELSON_NODE_RESTART_TIMEOUT_MS: "15000" },
      dataDir: server.dataDir,
    });
    await waitForAgents(server.url, projectId, ADMIN, names, ids, "three agents connected again");
    const victim = firstWorker.name;
    const old = agents[victim] as AgentProc;
    const before = Object.fromEntries(HOSTS.map((h) => [h.name, restartsIn(agents[h.name] as AgentProc)]));
    const t0 = Date.now();
    await restartWorkersUntilRestarting(old, before[victim] as number);
    await old.stop("SIGKILL");
    const op = await waitUntil(
      "the restartWorkers operation finished",
      async () => {
        const last = await lastOperation("cluster.restart");
        return last?.state === "succeeded" || last?.state === "failed" ? last : undefined;
      },
      60_000,
      250,
    );
    const elapsed = Date.now() - t0;
    process.stderr.write(
      `[rollout] restartWorkers with ${victim}'s agent gone: ${op.state} after ${(elapsed / 1000).toFixed(1)} s: ${op.error}\n`,
    );
    expect(op.state).toBe("failed");
    expect(op.error).toContain(victim);
    expect(op.error).toContain(ids[victim]);
    expect(elapsed).toBeGreaterThanOrEqual(15_000);
    expect(await cluster()).toMatchObject({ taskStatus: "error" });
    for (const h of HOSTS.filter((x) => x.name !== victim)) {
      expect(restartsIn(agents[h.name] as AgentProc) - (before[h.name] as number), h.name).toBe(0);
    }

    // The agent returns; a new request completes and leaves every node ok and uncordoned.
    const again = await startAgent({
      name: victim,
      controlPlane: server.url,
      joinToken: joinTokens[victim],
      stateDir: old.stateDir,
      env: nodeHostEnv(dirs[victim] as NodeHostDirs, firstWorker.ip),
    });
    agents[victim] = again;
    // Connected, too: the row's `ok` may be the old agent's, from before it was killed.
    await waitUntil(
      `${victim} back and ok`,
      async () => {
        const host = (
          await api<HostRecord & { info: { responding: boolean } }>(`${server.url}/v1/hosts/${ids[victim]}`, ADMIN)
        ).body;
        return host.info.responding && host.nodeStatus === "ok";
      },
      60_000,
      250,
    );
    const retry = await api(
      `${server.url}/v3/${projectId}/clusters/${clusterId}/restartWorkers?batchPercent=50`,
      ADMIN,
      {
        method: "POST",
      },
    );
    expect(retry.status, JSON.stringify(retry.body)).toBe(200);
    const second = await waitUntil(
      "the second restartWorkers finished",
      async () => {
        const last = await lastOperation("cluster.restart");
        return last?.state === "succeeded" || last?.state === "failed" ? last : undefined;
      },
      60_000,
      250,
    );
    expect(second.error).toBeNull();
    expect(second.state).toBe("succeeded");
    await expectAllOkAndUncordoned();
  }, 300_000);
});
