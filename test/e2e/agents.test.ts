import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProc, startAgent } from "./support/agents.ts";
import {
  api,
  LOG_LEVEL,
  logRecords,
  REPO_ROOT,
  type ServerProc,
  startServer,
  tempDir,
  waitUntil,
} from "./support/processes.ts";

/**
 * keelson-server and three real keelson-agent processes, as an operator runs them:
 * registration, nodes in v3 and v4, the port-8082 record, restarts of either side, a killed
 * agent, and a self-upgrade to a package built by `pnpm pack:agent` (then a corrupt one).
 */

interface NodeV4 {
  uuid: string;
  name: string;
  primaryIp: string;
  status: string;
  clusterUuid: string | null;
  cloudProviderType: string;
  agentConnected: boolean;
  lastSeen: string | null;
}
interface HostRecord {
  id: string;
  info: { hostname: string; responding: boolean; last_response_time: string | null };
  message: string;
  host_agent: { version: string; status: string; error?: string };
  facts: { hostname: string; primaryIp: string } | null;
}

const ADMIN = "e2e-admin-token";
const AGENT_VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "packages", "agent", "package.json"), "utf8"))
  .version as string;
const NEW_VERSION = `${AGENT_VERSION.replace(/^(\d+)\.(\d+)\.(\d+).*$/, (_m, a, b, c) => `${a}.${b}.${Number(c) + 1}`)}`;

describe("agents end to end", () => {
  let server: ServerProc;
  let projectId: string;
  let projectToken: string;
  const agents: Record<string, AgentProc> = {};
  const ids: Record<string, string> = {};
  const scratch = tempDir("keelson-e2e-agents-");
  let packages: Server | undefined;

  const nodes = async (version = "v4") => {
    const res = await api<NodeV4[]>(`${server.url}/${version}/${projectId}/nodes`, projectToken);
    expect(res.status).toBe(200);
    return res.body;
  };
  const hostRecord = async (id: string) => (await api<HostRecord>(`${server.url}/v1/hosts/${id}`, projectToken)).body;
  const connected = async (names: string[]) => {
    const list = await nodes();
    return names.every((n) => list.some((node) => node.name === n && node.agentConnected));
  };
  const mintJoinToken = async () => {
    const res = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/joinTokens`, ADMIN, {
      method: "POST",
      body: {},
    });
    expect(res.status).toBe(201);
    return res.body.token;
  };
  const serverEnv = { KEELSON_AGENT_HEARTBEAT_MS: "2000" };

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN, env: serverEnv });
    const projects = await api<{ id: string; name: string }[] | { projects: { id: string; name: string }[] }>(
      `${server.url}/v1/projects`,
      ADMIN,
    );
    const list = Array.isArray(projects.body) ? projects.body : projects.body.projects;
    projectId = list.find((p) => p.name === "default")?.id as string;
    expect(projectId).toMatch(/^[0-9a-f-]{36}$/);
    const token = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/tokens`, ADMIN, {
      method: "POST",
      body: { name: "e2e", role: "admin" },
    });
    expect(token.status).toBe(201);
    projectToken = token.body.token;
  });

  afterAll(async () => {
    await Promise.all(Object.values(agents).map((a) => a.stop("SIGKILL", 5_000)));
    await server?.stop();
    await new Promise<void>((r) => (packages ? packages.close(() => r()) : r()));
    for (const a of Object.values(agents)) rmSync(a.stateDir, { recursive: true, force: true });
    rmSync(server?.dataDir ?? "", { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  });

  it("registers three agents with join tokens as unattached local nodes", async () => {
    const tokens = await Promise.all(["host-a", "host-b", "host-c"].map(() => mintJoinToken()));
    const names = ["host-a", "host-b", "host-c"];
    await Promise.all(
      names.map(async (name, i) => {
        agents[name] = await startAgent({ name, controlPlane: server.url, joinToken: tokens[i] as string });
      }),
    );
    await waitUntil("three connected agents", () => connected(names), 60_000);
    for (const name of names) ids[name] = agents[name]?.hostId() as string;

    const list = await nodes("v4");
    expect(list.map((n) => n.name).sort()).toEqual(names);
    for (const node of list) {
      expect(node).toMatchObject({
        uuid: ids[node.name],
        status: "ok",
        clusterUuid: null,
        cloudProviderType: "local",
        agentConnected: true,
      });
      expect(node.primaryIp).not.toBe("");
      expect(typeof node.lastSeen).toBe("string");
    }
    const v3 = await nodes("v3");
    expect(v3).toHaveLength(3);
    for (const node of v3) expect(node).toHaveProperty("cloudProviderUuid");
    const one = await api<NodeV4>(`${server.url}/v3/${projectId}/nodes/${ids["host-b"]}`, projectToken);
    expect(one.body).toMatchObject({ uuid: ids["host-b"], name: "host-b" });
  });

  it("refuses a join token that was already used, and the agent exits saying so", async () => {
    const token = await mintJoinToken();
    // Spend it the way an agent does (the registration endpoint) ...
    const spent = await fetch(`${server.url}/v1/agents/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ joinToken: token, hostname: "host-d" }),
    });
    expect(spent.status).toBe(201);
    // ... then a second host presents it.
    const second = await startAgent({ name: "host-e", controlPlane: server.url, joinToken: token });
    agents["host-e"] = second;
    expect(await second.exited).toBe(77);
    // Saying why: the fatal record carries the control plane's own error code.
    expect(logRecords(second)).toContainEqual(
      expect.objectContaining({ level: LOG_LEVEL.fatal, code: "join_token_used" }),
    );
  });

  it("serves the host record on each agent's own listener", async () => {
    const a = agents["host-a"] as AgentProc;
    const url = `http://${a.listen}/v1/hosts/${ids["host-a"]}`;
    const local = await api<HostRecord>(url, a.localToken());
    expect(local.status).toBe(200);
    expect(local.body).toMatchObject({
      id: ids["host-a"],
      info: { hostname: "host-a", responding: true, last_response_time: null },
      message: "",
      host_agent: { version: AGENT_VERSION, status: "running" },
      nodeStatus: "ok",
      clusterUuid: null,
      phases: [],
    });
    expect(local.body.facts?.hostname).toBe("host-a");
    // A project token of the host's project works too (checked with the control plane).
    expect((await api(url, projectToken)).status).toBe(200);
    expect((await api(url, "not-a-token")).status).toBe(403);
    expect((await api(url, agents["host-b"]?.localToken() as string)).status).toBe(403);
    expect((await api(`http://${a.listen}/v1/hosts/${ids["host-b"]}`, a.localToken())).status).toBe(404);
    // The control plane serves the same record from the agent's last report.
    const central = await hostRecord(ids["host-a"] as string);
    expect(central).toMatchObject({ id: ids["host-a"], info: { hostname: "host-a", responding: true } });
    expect(central.host_agent).toEqual({ version: AGENT_VERSION, status: "running" });
  });

  it("survives a control-plane restart: the agents reconnect, no node is duplicated", async () => {
    const before = (await nodes()).map((n) => n.uuid).sort();
    const names = ["host-a", "host-b", "host-c"];
    const welcomes = () => names.map((n) => agents[n]?.output().split('"msg":"link connected"').length ?? 0);
    const welcomedBefore = welcomes();
    expect(await server.stop()).toBe(0);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
    server = await startServer({
      adminToken: ADMIN,
      dataDir: server.dataDir,
      port: Number(new URL(server.url).port),
      env: serverEnv,
    });
    await waitUntil("agents back after the restart", () => connected(names), 30_000);
    // Each agent saw its link drop and was welcomed again, by the new process. The API can say
    // connected a moment before an agent has handled its welcome, and its log line reaches this
    // test through a pipe: wait for the lines (bounded), then check there is exactly one more each.
    const welcomedAgain = welcomedBefore.map((n) => n + 1);
    await waitUntil(
      "each agent's welcome by the new process logged",
      async () => welcomes().every((n, i) => n >= (welcomedAgain[i] ?? 0)),
      10_000,
    ).catch(() => undefined);
    expect(welcomes()).toEqual(welcomedAgain);
    expect((await nodes()).map((n) => n.uuid).sort()).toEqual(before);
  });

  it("keeps the host id when an agent restarts, without a join token", async () => {
    const b = agents["host-b"] as AgentProc;
    await b.stop();
    // npx dies of the signal itself, so its exit code says nothing of the agent under it: the
    // agent's own stop record (reason and exit code 0) is the evidence that it stopped gracefully.
    expect(logRecords(b)).toContainEqual(expect.objectContaining({ reason: "SIGTERM", exitCode: 0 }));
    await waitUntil("host-b shown disconnected", async () => {
      const node = (await nodes()).find((n) => n.name === "host-b");
      return node?.agentConnected === false;
    });
    const again = await startAgent({ name: "host-b", controlPlane: server.url, stateDir: b.stateDir });
    agents["host-b"] = again;
    await waitUntil("host-b reconnected", () => connected(["host-b"]), 30_000);
    expect(again.hostId()).toBe(ids["host-b"]);
    expect((await nodes()).filter((n) => n.name === "host-b")).toHaveLength(1);
  });

  it("shows a killed agent as disconnected, with when it was last seen", async () => {
    const c = agents["host-c"] as AgentProc;
    await c.stop("SIGKILL");
    const node = await waitUntil("host-c shown disconnected", async () => {
      const found = (await nodes()).find((n) => n.name === "host-c");
      return found?.agentConnected === false ? found : undefined;
    });
    expect(node.lastSeen).not.toBeNull();
    const record = await hostRecord(ids["host-c"] as string);
    expect(record.info.responding).toBe(false);
    expect(record.info.last_response_time).toBe(node.lastSeen);
    // An offline host cannot be upgraded.
    const upgrade = await api(`${server.url}/v1/hosts/${ids["host-c"]}/hostagent`, projectToken, {
      method: "PUT",
      body: { name: "keelson-agent", version: NEW_VERSION, url: "http://127.0.0.1:9/x.tar.gz" },
    });
    expect(upgrade.status).toBe(409);
  });

  it("exits non-zero, saying why, when the control plane refuses its credential", async () => {
    const c = agents["host-c"] as AgentProc;
    const identityFile = join(c.stateDir, "identity.json");
    const identity = JSON.parse(readFileSync(identityFile, "utf8"));
    writeFileSync(identityFile, JSON.stringify({ ...identity, credential: "khc_not-the-credential" }));
    const refused = await startAgent({ name: "host-c", controlPlane: server.url, stateDir: c.stateDir });
    agents["host-c"] = refused;
    // 77: the systemd unit's RestartPreventExitStatus, so a refused host is not retried forever.
    expect(await refused.exited).toBe(77);
    // Saying why: a fatal record with the refusal's close code and reason.
    expect(logRecords(refused)).toContainEqual(
      expect.objectContaining({ level: LOG_LEVEL.fatal, codeName: expect.any(String), reason: expect.any(String) }),
    );
  });

  it("upgrades an agent to a package built by pnpm pack:agent, and it comes back running the new version", async () => {
    const out = join(scratch, "packages");
    execFileSync("pnpm", ["pack:agent", "--version", NEW_VERSION, "--out", out], { cwd: REPO_ROOT, stdio: "pipe" });
    const file = join(out, `keelson-agent-${NEW_VERSION}.tar.gz`);
    packages = createServer((req, res) => {
      try {
        res.end(readFileSync(join(out, basename(req.url ?? ""))));
      } catch {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((r) => packages?.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(packages.address() as { port: number }).port}`;

    const a = agents["host-a"] as AgentProc;
    const res = await api(`${server.url}/v1/hosts/${ids["host-a"]}/hostagent`, projectToken, {
      method: "PUT",
      // No sha256: the agent reads the .sha256 that pack:agent wrote beside the package.
      body: { name: "keelson-agent", version: NEW_VERSION, url: `${base}/${basename(file)}` },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ accepted: true, status: "updating" });

    const record = await waitUntil(
      `host-a running ${NEW_VERSION}`,
      async () => {
        const r = await hostRecord(ids["host-a"] as string);
        return r.info.responding && r.host_agent.version === NEW_VERSION && r.host_agent.status === "running"
          ? r
          : undefined;
      },
      60_000,
    );
    expect(record.message).toBe("");
    const local = await api<HostRecord>(`http://${a.listen}/v1/hosts/${ids["host-a"]}`, a.localToken());
    expect(local.body.host_agent).toEqual({ version: NEW_VERSION, status: "running" });
    expect(readFileSync(join(a.stateDir, "versions", "current", "manifest.json"), "utf8")).toContain(NEW_VERSION);
    expect(a.child.exitCode).toBeNull();
    expect((await nodes()).filter((n) => n.name === "host-a")).toHaveLength(1);
  });

  it("refuses a corrupt package and keeps the running version, with the error in the host record", async () => {
    const out = join(scratch, "packages");
    const good = readFileSync(join(out, `keelson-agent-${NEW_VERSION}.tar.gz`));
    const corruptName = "keelson-agent-corrupt.tar.gz";
    // Half a package: its own checksum matches, so the failure is the package, not the download.
    const corrupt = good.subarray(0, Math.floor(good.length / 2));
    writeFileSync(join(out, corruptName), corrupt);
    const sha256 = execFileSync("sha256sum", [join(out, corruptName)], { encoding: "utf8" }).split(" ")[0];
    if (!packages) throw new Error("the package server of the previous test is not running");
    const base = `http://127.0.0.1:${(packages.address() as { port: number }).port}`;

    const res = await api(`${server.url}/v1/hosts/${ids["host-a"]}/hostagent`, projectToken, {
      method: "PUT",
      body: { name: "keelson-agent", version: `${NEW_VERSION}-next`, url: `${base}/${corruptName}`, sha256 },
    });
    expect(res.status).toBe(200);
    const record = await waitUntil(
      "the failed upgrade in host-a's record",
      async () => {
        const r = await hostRecord(ids["host-a"] as string);
        return r.message !== "" && r.host_agent.status === "running" ? r : undefined;
      },
      30_000,
    );
    expect(record.message).toMatch(/upgrade to .*-next failed: unpacking the package failed/);
    expect(record.host_agent).toMatchObject({ version: NEW_VERSION, status: "running", error: record.message });
    expect(record.info.responding).toBe(true);
    const a = agents["host-a"] as AgentProc;
    const local = await api<HostRecord>(`http://${a.listen}/v1/hosts/${ids["host-a"]}`, a.localToken());
    expect(local.body.host_agent.version).toBe(NEW_VERSION);
    expect(local.body.message).toBe(record.message);
  });

  it("upgrades an agent through a hosts.upgrade operation from a package uploaded to the control plane", async () => {
    const file = join(scratch, "packages", `keelson-agent-${NEW_VERSION}.tar.gz`);
    const upload = await fetch(`${server.url}/v1/agentPackages`, {
      method: "POST",
      headers: { "x-auth-token": ADMIN, "content-type": "application/octet-stream" },
      body: readFileSync(file),
    });
    expect(upload.status).toBe(200);
    expect(await upload.json()).toMatchObject({ version: NEW_VERSION });

    const res = await api<{ operationId: string }>(`${server.url}/v4/${projectId}/hostAgentUpgrades`, projectToken, {
      method: "POST",
      body: { version: NEW_VERSION, hosts: [ids["host-b"]] },
    });
    expect(res.status).toBe(200);
    const op = await waitUntil(
      "the hosts.upgrade operation settled",
      async () => {
        const list = await api<{ uuid: string; state: string; error: string | null }[]>(
          `${server.url}/v4/${projectId}/operations?target=${projectId}`,
          projectToken,
        );
        const found = list.body.find((o) => o.uuid === res.body.operationId);
        return found && (found.state === "succeeded" || found.state === "failed") ? found : undefined;
      },
      90_000,
    );
    expect(op).toMatchObject({ state: "succeeded", error: null });
    const record = await hostRecord(ids["host-b"] as string);
    expect(record.host_agent).toEqual({ version: NEW_VERSION, status: "running" });
    const b = agents["host-b"] as AgentProc;
    expect(readFileSync(join(b.stateDir, "versions", "current", "manifest.json"), "utf8")).toContain(NEW_VERSION);
  });
});
