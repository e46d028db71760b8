import { execFile, execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestNetwork, netnsUnavailable, type TestNetwork } from "./support/netns.ts";
import {
  alive,
  killNodeServices,
  liveServicePids,
  NODE_PACKAGE,
  type NodeHostDirs,
  nodeHostDirs,
  nodeHostEnv,
} from "./support/node-hosts.ts";
import { freePort, type Proc, api as plainApi, start, tempDir, trustedFetch, waitUntil } from "./support/processes.ts";

/**
 * The server listens on the test subnet, not loopback, so it speaks HTTPS (KEELSON_TLS's
 * default there) with the CA it made: this test's calls trust that CA alone, and the agents
 * pin it by the join token's caCertHash, as on real hosts.
 */
let serverFetch: typeof fetch = fetch;
const api = <T = unknown>(url: string, token: string, init: { method?: string; body?: unknown } = {}) =>
  plainApi<T>(url, token, { ...init, fetch: serverFetch });

/**
 * Three test hosts, each in a network namespace this test creates (own interfaces, own
 * loopback, a 10.99.x address on a bridge), with a real keelson-agent in each; the control
 * plane listens on the root namespace's end of the test subnet. Three masters attached one at
 * a time form a real etcd cluster through the phases (bootstrap, then `member add` before each
 * further member starts); a key written through one member reads back through another; after
 * one master is detached the remaining two still take writes. A rolling restart of the masters
 * (`restartMasters`) runs under a writer that puts a key every 100 ms through all three members:
 * no write may be lost once retried for up to one second.
 */

const ADMIN = "e2e-admin-token";
const unavailable = netnsUnavailable();
if (unavailable) throw new Error(`this test needs network namespaces: ${unavailable}`);

interface NodeV4 {
  uuid: string;
  name: string;
  status: string;
  clusterUuid: string | null;
  agentConnected: boolean;
}
interface HostRecord {
  nodeStatus: string;
  clusterUuid: string | null;
  phases: { id: string; state: string; lastError: string | null }[];
}

describe("etcd across three masters in network namespaces", () => {
  let net: TestNetwork;
  let server: Proc & { url: string };
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-netns-");
  const agents: Record<string, Proc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const names = ["m1", "m2", "m3"];
  const ipOf = (name: string) => net.hosts.find((h) => h.name === name)?.ip as string;

  const node = async (name: string) =>
    (await api<NodeV4>(`${server.url}/v4/${projectId}/nodes/${ids[name]}`, ADMIN)).body;
  const host = async (name: string) => (await api<HostRecord>(`${server.url}/v1/hosts/${ids[name]}`, ADMIN)).body;
  const attach = async (name: string) => {
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/attach`, ADMIN, {
      method: "POST",
      body: [{ uuid: ids[name], isMaster: true }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      `${name} ok`,
      async () => {
        const record = await host(name);
        const failed = record.phases.find((p) => p.state === "failed");
        if (record.nodeStatus === "failed") throw new Error(`${name} failed: ${failed?.id}: ${failed?.lastError}`);
        return record.clusterUuid === clusterId && record.nodeStatus === "ok" && record.phases.length === 21;
      },
      120_000,
      250,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}\n${agents[name]?.output().slice(-4000)}`);
    });
  };

  /** etcdctl from the node package with a master's client certificate (the apiserver's). */
  const etcdctl = (through: string[], args: string[], certsOf = "m1") => {
    const pki = join((dirs[certsOf] as NodeHostDirs).hostRoot, "etc", "keelson", "pki");
    return execFileSync(
      join(NODE_PACKAGE, "bin", "etcdctl"),
      [
        `--endpoints=${through.map((n) => `https://${ipOf(n)}:2379`).join(",")}`,
        `--cacert=${join(pki, "ca.crt")}`,
        `--cert=${join(pki, "etcd-client.crt")}`,
        `--key=${join(pki, "etcd-client.key")}`,
        "--dial-timeout=3s",
        "--command-timeout=5s",
        ...args,
      ],
      { encoding: "utf8", env: { ...process.env, ETCDCTL_API: "3" }, stdio: ["ignore", "pipe", "pipe"] },
    ).trim();
  };
  /**
   * The masters whose kube-controller-manager or kube-scheduler leads, by the
   * leader_election_master_status gauge each serves on its secure port (the client certificate
   * is that master's own controller identity; an unreachable one counts as not leading).
   */
  const leaders = async (controller: "kube-controller-manager" | "kube-scheduler") => {
    const port = controller === "kube-scheduler" ? 10259 : 10257;
    const gauge = (name: string) =>
      new Promise<number>((resolve) => {
        const pki = join((dirs[name] as NodeHostDirs).hostRoot, "etc", "keelson", "pki");
        const req = request(
          `https://${ipOf(name)}:${port}/metrics`,
          {
            ca: readFileSync(join(pki, "ca.crt")),
            cert: readFileSync(join(pki, `${controller}.crt`)),
            key: readFileSync(join(pki, `${controller}.key`)),
            timeout: 2000,
          },
          (res) => {
            let body = "";
            res.on("data", (c) => {
              body += c;
            });
            res.on("end", () => resolve(Number(/^leader_election_master_status\{[^}]*\} (\d)$/m.exec(body)?.[1] ?? 0)));
          },
        );
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", () => resolve(0));
        req.end();
      });
    const values = await Promise.all(names.map(gauge));
    return names.filter((_, i) => values[i] === 1);
  };
  const oneLeaderEach = async (what: string) => {
    for (const controller of ["kube-controller-manager", "kube-scheduler"] as const) {
      let last: string[] = [];
      await waitUntil(
        `${what}: one ${controller} leader`,
        async () => {
          last = await leaders(controller);
          return last.length === 1;
        },
        40_000,
        250,
      ).catch((err) => {
        throw new Error(`${(err as Error).message}; leading: [${last.join(", ")}]`);
      });
      // Still exactly one a little later: the others see the lease held and stay standing by.
      await new Promise((r) => setTimeout(r, 2500));
      expect(await leaders(controller), `${what}: ${controller} leaders`).toEqual(last);
    }
  };
  const members = (through: string[], certsOf = "m1") =>
    etcdctl(through, ["member", "list", "-w", "simple"], certsOf)
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        const [id, status, name, peers, clients] = line.split(", ");
        return { id, status, name, peers, clients };
      });

  beforeAll(async () => {
    net = createTestNetwork(names);
    const port = await freePort();
    const dataDir = join(scratch, "server");
    // Listens only on the test subnet: the namespaces reach it there, and so does this test.
    const proc = start("npx", ["--no-install", "keelson-server"], {
      KEELSON_LISTEN: `${net.gatewayIp}:${port}`,
      KEELSON_DATA_DIR: dataDir,
      KEELSON_ADMIN_TOKEN: ADMIN,
      KEELSON_LOG_LEVEL: "warn",
      KEELSON_AGENT_HEARTBEAT_MS: "2000",
    });
    server = { ...proc, url: `https://${net.gatewayIp}:${port}` };
    await waitUntil(
      "keelson-server",
      async () => {
        if (proc.child.exitCode !== null) throw new Error(`server exited: ${proc.output()}`);
        serverFetch = trustedFetch(dataDir);
        return (await serverFetch(`${server.url}/readyz`)).ok;
      },
      30_000,
    );
    const projects = await api<{ id: string; name: string }[] | { projects: { id: string; name: string }[] }>(
      `${server.url}/v1/projects`,
      ADMIN,
    );
    const list = Array.isArray(projects.body) ? projects.body : projects.body.projects;
    projectId = list.find((p) => p.name === "default")?.id as string;
    for (const h of net.hosts) {
      const joinToken = await api<{ token: string; caCertHash: string }>(
        `${server.url}/v1/projects/${projectId}/joinTokens`,
        ADMIN,
        {
          method: "POST",
          body: {},
        },
      );
      const d = nodeHostDirs(join(scratch, h.name));
      dirs[h.name] = d;
      // The agent runs inside the host's namespace, and so does everything its phases start.
      agents[h.name] = start("ip", net.exec(h, ["npx", "--no-install", "keelson-agent"]), {
        KEELSON_CONTROL_PLANE: server.url,
        KEELSON_JOIN_TOKEN: joinToken.body.token,
        KEELSON_CA_HASH: joinToken.body.caCertHash,
        KEELSON_STATE_DIR: join(d.root, "state"),
        KEELSON_AGENT_LISTEN: `${h.ip}:8082`,
        KEELSON_HOSTNAME: h.name,
        KEELSON_LOG_LEVEL: "info",
        KEELSON_AGENT_RECONNECT_INITIAL_MS: "100",
        KEELSON_AGENT_RECONNECT_MAX_MS: "1000",
        ...nodeHostEnv(d, h.ip),
      });
    }
    await waitUntil(
      "three agents connected from their namespaces",
      async () => {
        const res = await api<NodeV4[]>(`${server.url}/v4/${projectId}/nodes`, ADMIN);
        for (const n of res.body) ids[n.name] = n.uuid;
        return names.every((n) => res.body.some((x) => x.name === n && x.agentConnected));
      },
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    try {
      await Promise.all(Object.values(agents).map((a) => a.stop("SIGTERM", 10_000)));
      await server?.stop();
      for (const d of Object.values(dirs)) killNodeServices(d);
    } finally {
      net?.destroy();
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 60_000);

  it("each agent reports the address of its own namespace", async () => {
    for (const name of names) {
      const res = await api<{ primaryIp: string }>(`${server.url}/v4/${projectId}/nodes/${ids[name]}`, ADMIN);
      expect(res.body.primaryIp).toBe(ipOf(name));
    }
  });

  it("forms a three-member etcd cluster as the masters attach one at a time", async () => {
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: { name: "netns-etcd", containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
    });
    expect(created.status).toBe(200);
    clusterId = created.body.uuid;
    await attach("m1");
    expect(members(["m1"]).map((m) => m.name)).toEqual([ids.m1]);
    await attach("m2");
    await attach("m3");
    const list = members(["m1", "m2", "m3"]);
    expect(list.map((m) => m.name).sort()).toEqual([ids.m1, ids.m2, ids.m3].sort());
    expect(list.every((m) => m.status === "started")).toBe(true);
    for (const name of names) {
      const member = list.find((m) => m.name === ids[name]);
      expect(member?.peers).toBe(`https://${ipOf(name)}:2380`);
      expect(member?.clients).toBe(`https://${ipOf(name)}:2379`);
    }
    // m2 and m3 joined an existing cluster; m1 bootstrapped it.
    const env = (name: string) =>
      readFileSync(join((dirs[name] as NodeHostDirs).hostRoot, "etc", "etcd", "etcd.env"), "utf8");
    expect(env("m1")).toContain('ETCD_INITIAL_CLUSTER_STATE="new"');
    expect(env("m2")).toContain('ETCD_INITIAL_CLUSTER_STATE="existing"');
    expect(env("m3")).toContain('ETCD_INITIAL_CLUSTER_STATE="existing"');
  }, 400_000);

  it("runs kube-controller-manager and kube-scheduler on every master, exactly one of each leading", async () => {
    for (const name of names) {
      const pids = liveServicePids(dirs[name] as NodeHostDirs);
      expect(Object.keys(pids), name).toEqual(expect.arrayContaining(["kube-controller-manager", "kube-scheduler"]));
    }
    await oneLeaderEach("three masters");
  }, 120_000);

  it("reads through one member what was written through another", () => {
    expect(etcdctl(["m1"], ["put", "/keelson-e2e/greeting", "written-through-m1"])).toBe("OK");
    expect(etcdctl(["m3"], ["get", "/keelson-e2e/greeting", "--print-value-only"], "m3")).toBe("written-through-m1");
    expect(etcdctl(["m2"], ["put", "/keelson-e2e/second", "via-m2"], "m2")).toBe("OK");
    expect(etcdctl(["m1"], ["get", "/keelson-e2e/second", "--print-value-only"])).toBe("via-m2");
  });

  it("restartMasters restarts each master once while a writer loses no write after a 1 s retry", async () => {
    // The client files are copied: the writer must not depend on a host root mid-restart.
    const pki = join(scratch, "writer-pki");
    mkdirSync(pki, { recursive: true });
    const from = join((dirs.m1 as NodeHostDirs).hostRoot, "etc", "keelson", "pki");
    for (const f of ["ca.crt", "etcd-client.crt", "etcd-client.key"]) copyFileSync(join(from, f), join(pki, f));
    const endpoints = names.map((n) => `https://${ipOf(n)}:2379`).join(",");
    const putOnce = (key: string) =>
      new Promise<boolean>((resolve) => {
        execFile(
          join(NODE_PACKAGE, "bin", "etcdctl"),
          [
            `--endpoints=${endpoints}`,
            `--cacert=${join(pki, "ca.crt")}`,
            `--cert=${join(pki, "etcd-client.crt")}`,
            `--key=${join(pki, "etcd-client.key")}`,
            "--dial-timeout=1s",
            "--command-timeout=1s",
            "put",
            key,
            "v",
          ],
          { encoding: "utf8", env: { ...process.env, ETCDCTL_API: "3" }, timeout: 3_000 },
          (err, stdout) => resolve(!err && stdout.trim() === "OK"),
        );
      });
    interface WriteResult {
      key: string;
      firstTryFailed: boolean;
      /** ms from the first failure to the try that succeeded; Infinity if none did within 10 s. */
      retryMs: number;
    }
    // Each write retries every 100 ms after a failure; it counts as lost when no retry
    // started within 1 s of the first failure succeeded (tries go on for 10 s, for the figures).
    const write = async (key: string): Promise<WriteResult> => {
      if (await putOnce(key)) return { key, firstTryFailed: false, retryMs: 0 };
      const failedAt = Date.now();
      while (Date.now() - failedAt < 10_000) {
        await new Promise((r) => setTimeout(r, 100));
        const triedAt = Date.now();
        if (await putOnce(key)) return { key, firstTryFailed: true, retryMs: triedAt - failedAt };
      }
      return { key, firstTryFailed: true, retryMs: Number.POSITIVE_INFINITY };
    };
    const restartsIn = (name: string) =>
      (agents[name] as Proc).output().split('"msg":"restarting node phases"').length - 1;
    const before = Object.fromEntries(names.map((n) => [n, restartsIn(n)]));
    const etcdPid = (name: string) => liveServicePids(dirs[name] as NodeHostDirs).etcd;
    const etcdBefore = Object.fromEntries(names.map((n) => [n, etcdPid(n)]));
    for (const name of names) expect(etcdBefore[name], `${name} etcd pid`).toBeGreaterThan(0);

    const writes: Promise<WriteResult>[] = [];
    let writing = true;
    const startedAt = Date.now();
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        writes.push(write(`/keelson-e2e/restart/${String(i).padStart(5, "0")}`));
        await new Promise((r) => setTimeout(r, Math.max(0, startedAt + (i + 1) * 100 - Date.now())));
      }
    })();
    try {
      // A second of writes before the restart: the writer itself works.
      await new Promise((r) => setTimeout(r, 1_000));
      const res = await api(`${server.url}/v3/${projectId}/clusters/${clusterId}/restartMasters`, ADMIN, {
        method: "POST",
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      await waitUntil(
        "the restartMasters operation finished",
        async () => {
          const ops = await api<{ kind: string; state: string; error: string | null }[]>(
            `${server.url}/v4/${projectId}/operations?target=${clusterId}&limit=1`,
            ADMIN,
          );
          const op = ops.body[0];
          if (op?.state === "failed") throw new Error(`restartMasters failed: ${op.error}`);
          return op?.kind === "cluster.restart" && op.state === "succeeded";
        },
        300_000,
        500,
      );
      // A second of writes after it, too.
      await new Promise((r) => setTimeout(r, 1_000));
    } finally {
      writing = false;
      await writer;
    }
    const results = await Promise.all(writes);
    const failedFirst = results.filter((r) => r.firstTryFailed);
    const lost = results.filter((r) => r.retryMs > 1_000);
    const maxRetry = Math.max(0, ...failedFirst.map((r) => r.retryMs));
    process.stderr.write(
      `[etcd restartMasters] ${((Date.now() - startedAt) / 1000).toFixed(1)} s of writing: ${results.length} writes, ` +
        `${failedFirst.length} failed first tries, ${lost.length} not absorbed by a retry within 1 s, ` +
        `max retry time ${Number.isFinite(maxRetry) ? `${maxRetry} ms` : "never succeeded"}\n`,
    );
    for (const name of names) expect(restartsIn(name) - (before[name] as number), `${name} restarts`).toBe(1);
    // Each master was waited for on the etcd member health its agent reported (members ==
    // healthy == 3), never on the fallback for agents that send none (it logs a warning).
    expect(server.output()).not.toContain("reports no etcd member health");
    // Each member really went away and came back: a new etcd process on every master.
    for (const name of names) {
      expect(etcdPid(name), `${name} etcd pid`).toBeGreaterThan(0);
      expect(etcdPid(name), `${name} etcd restarted`).not.toBe(etcdBefore[name]);
    }
    expect(
      lost.map((r) => r.key),
      "writes lost",
    ).toEqual([]);
    // Every write that was acknowledged is there, read through one member and another.
    const keys = etcdctl(["m2"], ["get", "/keelson-e2e/restart/", "--prefix", "--keys-only"], "m2")
      .split("\n")
      .filter(Boolean);
    expect(keys.sort()).toEqual(results.map((r) => r.key).sort());
    for (const name of names) expect((await node(name)).status, name).toBe("ok");
    expect(members(["m1", "m2", "m3"]).every((m) => m.status === "started")).toBe(true);
    // The rolling restart kept, or re-elected, one leader per controller.
    await oneLeaderEach("after restartMasters");
  }, 360_000);

  it("detaching one master removes its member; the other two still take writes", async () => {
    const d3 = dirs.m3 as NodeHostDirs;
    const pids = Object.values(liveServicePids(d3));
    expect(pids.length).toBe(9);
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/detach`, ADMIN, {
      method: "POST",
      body: [{ uuid: ids.m3, isMaster: true }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "m3 detached",
      async () => {
        const n = await node("m3");
        return n.clusterUuid === null && n.status === "ok";
      },
      90_000,
      250,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}\n${agents.m3?.output().slice(-4000)}`);
    });
    const list = members(["m1", "m2"]);
    expect(list.map((m) => m.name).sort()).toEqual([ids.m1, ids.m2].sort());
    expect(etcdctl(["m2"], ["put", "/keelson-e2e/after-detach", "still-writable"], "m2")).toBe("OK");
    expect(etcdctl(["m1"], ["get", "/keelson-e2e/after-detach", "--print-value-only"])).toBe("still-writable");
    expect(etcdctl(["m1"], ["get", "/keelson-e2e/greeting", "--print-value-only"])).toBe("written-through-m1");
    // m3 is clean: no etcd (or any other service) left, its data and certificates gone.
    for (const pid of pids) expect(alive(pid), `pid ${pid}`).toBe(false);
    expect(existsSync(join(d3.hostRoot, "var", "lib", "etcd"))).toBe(false);
    expect(existsSync(join(d3.hostRoot, "etc", "keelson"))).toBe(false);
    expect((await node("m1")).status).toBe("ok");
    expect((await node("m2")).status).toBe("ok");
  }, 120_000);
});
