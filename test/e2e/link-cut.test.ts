import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentProc } from "./support/agents.ts";
import {
  buildCluster,
  expectNodesOkAndUncordoned,
  type HostRecord,
  startNodeAgents,
  tearDownHosts,
} from "./support/node-checks.ts";
import type { NodeHostDirs } from "./support/node-hosts.ts";
import { api, freePort, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.ts";

/**
 * A worker's link (its socket, not its process) is cut in the middle of its restart. The
 * worker's agent talks to keelson-server through a TCP proxy in this process, so its
 * connection alone can be reset and its reconnects refused while the agent and its running
 * `node.restart` carry on. Cut with the link back within ~2 s, the rollout waits, the agent's
 * result reaches the control plane after the reconnect, and the restart completes: the node
 * restarted exactly once, ok and not cordoned. Cut past the node timeout, the operation fails
 * naming the node, and once the link is back a new request completes. Cut just as the agent
 * starts (its `converging` report lost with the link) and back only once the restart ran whole
 * offline: the control plane still recognises the restart as done when the node reports `ok`.
 */

const ADMIN = "e2e-admin-token";
const MASTER = { name: "master-51", ip: "127.0.0.51", isMaster: true } as const;
const WORKER = { name: "worker-52", ip: "127.0.0.52", isMaster: false } as const;
const HOSTS = [MASTER, WORKER] as const;
/** How long the link stays refused in the first case: a few reconnect attempts' worth. */
const REFUSE_MS = 2_000;
const SHORT_NODE_TIMEOUT_MS = 15_000;

interface Operation {
  kind: string;
  state: string;
  error: string | null;
}

const occurrences = (agent: AgentProc, msg: string) => agent.output().split(`"msg":"${msg}"`).length - 1;
const restartsIn = (agent: AgentProc) => occurrences(agent, "restarting node phases");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The agent's newest node.restart in its command record (commands.json, written atomically). */
const lastRestartRecord = (agent: AgentProc) => {
  const entries = JSON.parse(readFileSync(join(agent.stateDir, "commands.json"), "utf8")) as {
    id: string;
    name: string;
    outcome?: { ok: boolean };
  }[];
  return entries.filter((e) => e.name === "node.restart").at(-1);
};

describe("an agent's link cut in the middle of its restart", () => {
  let server: ServerProc;
  let port: number;
  let proxy: TcpProxy;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-link-cut-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const env = { KEELSON_AGENT_HEARTBEAT_MS: "2000", KEELSON_NODE_RESTART_TIMEOUT_MS: "60000" };

  const agent = (h: { name: string }) => agents[h.name] as AgentProc;

  const nodesConnected = async () => {
    const res = await api<{ uuid: string; name: string; agentConnected: boolean }[]>(
      `${server.url}/v4/${projectId}/nodes`,
      ADMIN,
    );
    return Object.fromEntries(res.body.map((n) => [n.name, n.agentConnected]));
  };
  const waitAllConnected = () =>
    waitUntil(
      "both agents connected",
      async () => {
        const connected = await nodesConnected();
        return HOSTS.every((h) => connected[h.name] === true);
      },
      60_000,
    );

  const cluster = async () =>
    (await api<Record<string, unknown>>(`${server.url}/v3/${projectId}/clusters/${clusterId}`, ADMIN)).body;

  const restartWorkers = async () => {
    const res = await api(`${server.url}/v3/${projectId}/clusters/${clusterId}/restartWorkers`, ADMIN, {
      method: "POST",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  const finished = (timeoutMs: number) =>
    waitUntil(
      "the restartWorkers operation finished",
      async () => {
        const ops = await api<Operation[]>(
          `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
          ADMIN,
        );
        const op = ops.body[0];
        return op?.kind === "cluster.restart" && (op.state === "succeeded" || op.state === "failed") ? op : undefined;
      },
      timeoutMs,
      250,
    );

  const expectAllOkAndUncordoned = () => expectNodesOkAndUncordoned(server.url, ADMIN, HOSTS, ids, dirs);

  beforeAll(async () => {
    port = await freePort();
    server = await startServer({ adminToken: ADMIN, port, env });
    proxy = await startTcpProxy({ host: "127.0.0.1", port });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    await startNodeAgents({
      serverUrl: server.url,
      token: ADMIN,
      projectId,
      hosts: HOSTS,
      scratch,
      agents,
      dirs,
      ids,
      // Only the worker goes through the proxy: cutting it leaves the master's link alone.
      controlPlaneFor: (h) => (h.name === MASTER.name ? server.url : proxy.url),
    });
    expect(proxy.stats().live).toBeGreaterThanOrEqual(1);
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await tearDownHosts({ agents, server, dirs, scratch });
  }, 60_000);

  it("builds a cluster of one master and one worker", async () => {
    clusterId = await buildCluster(
      server.url,
      ADMIN,
      projectId,
      { name: "e2e-link-cut", containersCidr: "10.50.0.0/16", servicesCidr: "10.51.0.0/16" },
      HOSTS.map((h) => ({ uuid: ids[h.name] as string, isMaster: h.isMaster })),
    );
  }, 150_000);

  it("a link cut mid-restart and back within seconds: the restart completes, the node restarted once", async () => {
    const worker = agent(WORKER);
    const before = { worker: restartsIn(worker), master: restartsIn(agent(MASTER)) };
    const drops = occurrences(worker, "link closed; reconnecting");
    const welcomes = occurrences(worker, "link connected");
    const t0 = Date.now();
    await restartWorkers();
    await waitUntil("the worker restarting", async () => restartsIn(worker) === before.worker + 1, 60_000, 20);
    proxy.refuse(true);
    const cutAt = Date.now();
    expect(proxy.cut(), "live connections cut").toBeGreaterThanOrEqual(1);
    // The control plane saw the link go (not merely a quiet socket).
    await waitUntil(
      "the server marking the worker's agent disconnected",
      async () => (await nodesConnected())[WORKER.name] === false,
      REFUSE_MS,
      50,
    );
    await sleep(Math.max(0, cutAt + REFUSE_MS - Date.now()));
    const refused = proxy.stats().refused;
    proxy.refuse(false);

    const op = await finished(60_000);
    const seconds = ((Date.now() - t0) / 1000).toFixed(1);
    const redelivered = occurrences(worker, "command re-delivered; answering from the record");
    process.stderr.write(
      `[link-cut] restartWorkers across a ${REFUSE_MS} ms cut: ${op.state} after ${seconds} s ` +
        `(${refused} reconnects refused; result ${redelivered > 0 ? "re-sent from the agent's record" : "sent on the new link"})\n`,
    );
    expect(op.error).toBeNull();
    expect(op.state).toBe("succeeded");
    // The agent really lost its link, tried again while refused, and came back.
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(occurrences(worker, "link closed; reconnecting")).toBeGreaterThan(drops);
    expect(occurrences(worker, "link connected")).toBeGreaterThan(welcomes);
    expect((await nodesConnected())[WORKER.name]).toBe(true);
    // Exactly one restart of the worker (a re-delivered command is answered, not run again);
    // restartWorkers leaves the master alone.
    expect(restartsIn(worker) - before.worker).toBe(1);
    expect(restartsIn(agent(MASTER)) - before.master).toBe(0);
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
    await expectAllOkAndUncordoned();
  }, 120_000);

  it("a link cut past the node timeout fails the restart naming the node; with the link back a new one completes", async () => {
    // The same data dir and port with a short node timeout; the worker comes back through the proxy.
    await server.stop();
    server = await startServer({
      adminToken: ADMIN,
      port,
      env: { ...env, KEELSON_NODE_RESTART_TIMEOUT_MS: String(SHORT_NODE_TIMEOUT_MS) },
      dataDir: server.dataDir,
    });
    await waitAllConnected();
    const worker = agent(WORKER);
    const before = { worker: restartsIn(worker), master: restartsIn(agent(MASTER)) };
    const t0 = Date.now();
    await restartWorkers();
    await waitUntil("the worker restarting", async () => restartsIn(worker) === before.worker + 1, 60_000, 20);
    proxy.refuse(true);
    expect(proxy.cut(), "live connections cut").toBeGreaterThanOrEqual(1);

    const op = await finished(SHORT_NODE_TIMEOUT_MS + 20_000);
    const elapsed = Date.now() - t0;
    process.stderr.write(
      `[link-cut] restartWorkers with the link kept cut: ${op.state} after ${(elapsed / 1000).toFixed(1)} s: ${op.error}\n`,
    );
    expect(op.state).toBe("failed");
    expect(op.error).toContain(WORKER.name);
    expect(op.error).toContain(ids[WORKER.name]);
    expect(elapsed).toBeGreaterThanOrEqual(SHORT_NODE_TIMEOUT_MS);
    const failedCluster = await cluster();
    expect(failedCluster.taskStatus).toBe("error");
    expect(String(failedCluster.taskError)).toContain(WORKER.name);
    expect(proxy.stats().refused, "reconnects refused during the cut").toBeGreaterThanOrEqual(1);
    expect((await nodesConnected())[WORKER.name]).toBe(false);

    // The link comes back: the agent reconnects by itself, its node reports ok, and a new
    // request restarts it once more (the timed-out command is not run again).
    proxy.refuse(false);
    await waitUntil(
      `${WORKER.name} connected and ok again`,
      async () =>
        (await nodesConnected())[WORKER.name] === true &&
        (await api<HostRecord>(`${server.url}/v1/hosts/${ids[WORKER.name]}`, ADMIN)).body.nodeStatus === "ok",
      30_000,
      250,
    );
    await restartWorkers();
    const second = await finished(SHORT_NODE_TIMEOUT_MS + 10_000);
    expect(second.error).toBeNull();
    expect(second.state).toBe("succeeded");
    expect(restartsIn(worker) - before.worker).toBe(2);
    expect(restartsIn(agent(MASTER)) - before.master).toBe(0);
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
    await expectAllOkAndUncordoned();
  }, 120_000);

  it("a restart run whole while the link is cut (its converging report lost): the rollout still sees it done", async () => {
    const worker = agent(WORKER);
    const before = { worker: restartsIn(worker), master: restartsIn(agent(MASTER)) };
    const previousCommand = lastRestartRecord(worker)?.id;
    // The cut comes with the agent's first frame after the command reached it, i.e. the
    // `converging` report it sends on starting the restart: the control plane never hears
    // that the node left `ok`.
    // Needs the rollout to tell a restart by the phases' start times, not by a `converging`
    // report alone (packages/control-plane/src/domain/clusters/rollouts/rollout-nodes.ts, rollNode):
    // without that it waits for the node timeout although the node is back.
    let cutFired = false;
    void proxy.cutOnReply('"name":"node.restart"').then(() => {
      cutFired = true;
    });
    const t0 = Date.now();
    await restartWorkers();
    await waitUntil("the cut on the agent's first frame after the command", async () => cutFired, 30_000, 20);
    // The agent finishes the restart on its own, offline: the command done in its record, its
    // node ok again with every phase running (its own listener says so; the server cannot).
    const local = `http://${worker.listen}/v1/hosts/${ids[WORKER.name]}`;
    await waitUntil(
      `${WORKER.name} restarted and ok while cut off`,
      async () => {
        const record = lastRestartRecord(worker);
        if (record?.id === previousCommand || record?.outcome?.ok !== true) return false;
        const host = (await api<HostRecord>(local, worker.localToken())).body;
        return host.nodeStatus === "ok" && host.phases.every((p) => p.state === "running" || p.id === "drain-pods");
      },
      20_000,
      100,
    );
    expect((await nodesConnected())[WORKER.name]).toBe(false);
    proxy.refuse(false);

    const op = await finished(SHORT_NODE_TIMEOUT_MS + 10_000);
    process.stderr.write(
      `[link-cut] restartWorkers run whole while cut off: ${op.state} after ${((Date.now() - t0) / 1000).toFixed(1)} s${op.error ? `: ${op.error}` : ""}\n`,
    );
    expect(op.error).toBeNull();
    expect(op.state).toBe("succeeded");
    expect(restartsIn(worker) - before.worker).toBe(1);
    expect(restartsIn(agent(MASTER)) - before.master).toBe(0);
    expect(await cluster()).toMatchObject({ status: "ok", taskStatus: "success", taskError: "" });
    await expectAllOkAndUncordoned();
  }, 120_000);
});
