import { execFileSync } from "node:child_process";
import { Resolver } from "node:dns/promises";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import https from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeOciArchive } from "../support/oci-image.ts";
import { type AgentProc, startAgent } from "./support/agents.ts";
import { tearDownHosts } from "./support/node-checks.ts";
import { alive, liveServicePids, type NodeHostDirs, nodeHostDirs, nodeHostEnv, setSwap } from "./support/node-hosts.ts";
import { api, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * keelson-server and three real keelson-agent processes, each a host of its own on one
 * machine (127.0.0.11, .12, .13; own state dir and host root; the test node package: real etcd,
 * stand-ins for the Kubernetes binaries). Through the API: a manual-deploy cluster gets a
 * master, then two workers; every node runs its phases to ok; a host that breaks (swap turned
 * on under its /proc) shows converging then failed with the phase's error and recovers when
 * fixed; detaching returns each node clean.
 */

const ADMIN = "e2e-admin-token";

interface PhaseRecord {
  id: string;
  state: string;
  lastError: string | null;
}
interface HostRecord {
  id: string;
  role_status: string;
  nodeStatus: string;
  clusterUuid: string | null;
  phases: PhaseRecord[];
}
interface NodeV4 {
  uuid: string;
  name: string;
  status: string;
  isMaster: number;
  api_responding: number;
  clusterUuid: string | null;
}
interface ClusterV4 {
  uuid: string;
  status: string;
  taskStatus: string;
  taskError: string;
  masterStatus: string;
  workerStatus: string;
  numMasters: number;
  numWorkers: number;
  lastOp: string;
}

const HOSTS = [
  { name: "master-11", ip: "127.0.0.11" },
  { name: "worker-12", ip: "127.0.0.12" },
  { name: "worker-13", ip: "127.0.0.13" },
] as const;

describe("node phases end to end: one master, two workers", () => {
  let server: ServerProc;
  let projectId: string;
  let token: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-phases-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};

  const cluster = async () => {
    const res = await api<ClusterV4>(`${server.url}/v4/${projectId}/clusters/${clusterId}`, token);
    expect(res.status).toBe(200);
    return res.body;
  };
  const node = async (name: string) => {
    const res = await api<NodeV4>(`${server.url}/v4/${projectId}/nodes/${ids[name]}`, token);
    expect(res.status).toBe(200);
    return res.body;
  };
  const host = async (name: string) => {
    const res = await api<HostRecord>(`${server.url}/v1/hosts/${ids[name]}`, token);
    expect(res.status).toBe(200);
    return res.body;
  };
  /** The agent's own port-8082 record. */
  const localHost = async (name: string) => {
    const agent = agents[name] as AgentProc;
    const res = await api<HostRecord>(`http://${agent.listen}/v1/hosts/${ids[name]}`, agent.localToken());
    expect(res.status).toBe(200);
    return res.body;
  };
  const explain = async () =>
    JSON.stringify(
      {
        cluster: await cluster().catch((e) => String(e)),
        hosts: await Promise.all(
          HOSTS.map(async (h) =>
            host(h.name)
              .then((r) => ({
                name: h.name,
                status: r.nodeStatus,
                cluster: r.clusterUuid,
                failed: r.phases.filter((p) => p.state === "failed"),
              }))
              .catch((e) => String(e)),
          ),
        ),
      },
      null,
      1,
    );
  const waitNodeOk = async (name: string, phases: number) =>
    waitUntil(
      `${name} ok with its phases running`,
      async () => {
        const record = await host(name);
        return record.clusterUuid === clusterId && record.nodeStatus === "ok" && record.phases.length === phases
          ? record
          : undefined;
      },
      90_000,
      200,
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}\n${await explain()}\n${agents[name]?.output().slice(-3000)}`);
    });

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN, env: { KEELSON_AGENT_HEARTBEAT_MS: "2000" } });
    const projects = await api<{ id: string; name: string }[] | { projects: { id: string; name: string }[] }>(
      `${server.url}/v1/projects`,
      ADMIN,
    );
    const list = Array.isArray(projects.body) ? projects.body : projects.body.projects;
    projectId = list.find((p) => p.name === "default")?.id as string;
    const minted = await api<{ token: string }>(`${server.url}/v1/projects/${projectId}/tokens`, ADMIN, {
      method: "POST",
      body: { name: "e2e-phases", role: "admin" },
    });
    token = minted.body.token;
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
        // Test knob: a backup "minute" of 1 s, so intervalInMins 1 backs up every second.
        env: nodeHostEnv(dirs[h.name] as NodeHostDirs, h.ip, { KEELSON_BACKUP_MINUTE_MS: "1000" }),
      });
    }
    await waitUntil(
      "three agents registered and connected",
      async () => {
        const res = await api<NodeV4[]>(`${server.url}/v4/${projectId}/nodes`, token);
        for (const n of res.body) ids[n.name] = n.uuid;
        const nodes = res.body as (NodeV4 & { agentConnected: boolean })[];
        return HOSTS.every((h) => nodes.some((n) => n.name === h.name && n.agentConnected));
      },
      60_000,
    );
  }, 120_000);

  afterAll(() => tearDownHosts({ agents, server, dirs, scratch }), 60_000);

  it("creates a manual-deploy cluster that waits, pending, for a master", async () => {
    const created = await api<{ uuid: string }>(`${server.url}/v4/${projectId}/clusters`, token, {
      method: "POST",
      body: { name: "e2e-phases", containersCidr: "10.20.0.0/16", servicesCidr: "10.21.0.0/16" },
    });
    expect(created.status).toBe(200);
    clusterId = created.body.uuid;
    await waitUntil("create settled", async () => (await cluster()).taskStatus === "success");
    expect((await cluster()).status).toBe("pending");
  });

  it("attaches the master: the cluster goes creating, then ok; the master runs 21 phases", async () => {
    const statuses: string[] = [];
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/attach`, token, {
      method: "POST",
      body: [{ uuid: ids["master-11"], isMaster: true }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "cluster ok",
      async () => {
        const c = await cluster();
        if (statuses.at(-1) !== c.status) statuses.push(c.status);
        if (c.taskStatus === "error") throw new Error(`attach failed: ${c.taskError}\n${await explain()}`);
        return c.status === "ok";
      },
      90_000,
      100,
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}\n${await explain()}\n${agents["master-11"]?.output().slice(-3000)}`);
    });
    expect(statuses).toContain("creating");
    expect(statuses.at(-1)).toBe("ok");
    const record = await waitNodeOk("master-11", 21);
    expect(record.phases.filter((p) => p.state === "running")).toHaveLength(20);
    // drain is stop-only: it runs when the node leaves.
    expect(record.phases.find((p) => p.id === "drain-pods")?.state).toBe("not-started");
    const master = await node("master-11");
    expect(master).toMatchObject({ clusterUuid: clusterId, isMaster: 1, status: "ok", api_responding: 1 });
    expect(await cluster()).toMatchObject({ numMasters: 1, numWorkers: 0, masterStatus: "healthy" });
    // The agent's own port-8082 record says the same.
    const local = await localHost("master-11");
    expect(local).toMatchObject({ clusterUuid: clusterId, nodeStatus: "ok", role_status: "ok" });
    expect(local.phases).toHaveLength(21);
    expect(Object.keys(liveServicePids(dirs["master-11"] as NodeHostDirs)).sort()).toEqual(
      [
        "containerd",
        "coredns",
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-proxy",
        "kubelet",
        "node-bouncer",
      ].sort(),
    );
  }, 120_000);

  it("serves the cluster's API to the control plane's kubeconfig, its token checked by the node bouncer", async () => {
    const res = await fetch(`${server.url}/v4/${projectId}/kubeconfig/${clusterId}`, {
      headers: { "x-auth-token": token },
    });
    expect(res.status).toBe(200);
    const kubeconfig = await res.text();
    const serverUrl = /server: (\S+)/.exec(kubeconfig)?.[1];
    const ca = Buffer.from(/certificate-authority-data: (\S+)/.exec(kubeconfig)?.[1] ?? "", "base64").toString();
    const bearer = /token: (\S+)/.exec(kubeconfig)?.[1] as string;
    expect(serverUrl).toBe("https://127.0.0.11:443");
    // The bouncer asks the agent, which asks the control plane over the link.
    expect(await kubeGet(`${serverUrl}/api/v1/nodes`, ca, bearer)).toBe(200);
    expect(await kubeGet(`${serverUrl}/api/v1/nodes`, ca, `${bearer.slice(0, -4)}AAAA`)).toBe(401);
  });

  it("resolves kube-dns and kubernetes.default through the master's CoreDNS on its address, port 53", async () => {
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers(["127.0.0.11:53"]);
    // The tenth and first addresses of servicesCidr: the kubelets' clusterDNS and the API's Service.
    const kubeDns = await waitUntil(
      "kube-dns to resolve",
      () => resolver.resolve4("kube-dns.kube-system.svc.cluster.local").catch(() => undefined),
      20_000,
      200,
    );
    expect(kubeDns).toEqual(["10.21.0.10"]);
    expect(await resolver.resolve4("kubernetes.default.svc.cluster.local")).toEqual(["10.21.0.1"]);
    const missing = await resolver
      .resolve4("nope.default.svc.cluster.local")
      .catch((e: NodeJS.ErrnoException) => e.code);
    expect(missing).toBe("ENOTFOUND");
  });

  it("takes real etcd backups on the master once an update enables them, pruned to the count", async () => {
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, token, {
      method: "PUT",
      body: { etcdBackup: { isEtcdBackupEnabled: true, intervalInMins: 1, maxIntervalBackupCount: 2 } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const dir = join((dirs["master-11"] as NodeHostDirs).hostRoot, "var", "lib", "keelson", "etcd-backups");
    const files = () => (existsSync(dir) ? readdirSync(dir).filter((f) => /^etcd-interval-.*\.db$/.test(f)) : []);
    // Three runs at least (one a second), never more than two kept.
    await waitUntil(
      "backups taken and pruned",
      async () => {
        expect(files().length).toBeLessThanOrEqual(2);
        return files().length === 2 && (await cluster()).taskStatus === "success";
      },
      30_000,
      200,
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}\n${agents["master-11"]?.output().slice(-3000)}`);
    });
    await new Promise((r) => setTimeout(r, 1500));
    expect(files().length).toBe(2);
    const status = execFileSync(
      "etcdctl",
      ["snapshot", "status", join(dir, files().sort().at(-1) as string), "-w", "json"],
      {
        env: { ...process.env, ETCDCTL_API: "3" },
        encoding: "utf8",
      },
    );
    expect((JSON.parse(status) as { totalKey: number }).totalKey).toBeGreaterThan(0);
    // The default status is success too: the master's log shows the runs really reported.
    const taken = agents["master-11"]?.output().match(/etcd backup taken/g) ?? [];
    expect(taken.length).toBeGreaterThanOrEqual(3);
    const c = await api<{ etcdBackup: { taskStatus: string; taskErrorDetail: string } }>(
      `${server.url}/v4/${projectId}/clusters/${clusterId}`,
      token,
    );
    expect(c.body.etcdBackup).toMatchObject({ taskStatus: "success", taskErrorDetail: "" });
  }, 60_000);

  it("attaches two workers, which converge to ok with 15 phases", async () => {
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/attach`, token, {
      method: "POST",
      body: [
        { uuid: ids["worker-12"], isMaster: false },
        { uuid: ids["worker-13"], isMaster: false },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    for (const name of ["worker-12", "worker-13"]) {
      const record = await waitNodeOk(name, 15);
      expect(record.phases.filter((p) => p.state === "running")).toHaveLength(14);
      expect(await node(name)).toMatchObject({ clusterUuid: clusterId, isMaster: 0, status: "ok", api_responding: 0 });
      const pids = liveServicePids(dirs[name] as NodeHostDirs);
      expect(Object.keys(pids).sort()).toEqual(["containerd", "kube-proxy", "kubelet"].sort());
      // The real containerd answers on the node's own socket, and the runtime phase's probe
      // container ran against this very containerd process before the node was ok.
      const hostRoot = (dirs[name] as NodeHostDirs).hostRoot;
      const version = execFileSync(
        "ctr",
        ["--address", join(hostRoot, "run", "containerd", "containerd.sock"), "version"],
        {
          encoding: "utf8",
        },
      );
      expect(version).toMatch(/Server:\s+Version:\s+1\.\d+/);
      const probe = JSON.parse(
        readFileSync(join(hostRoot, "var", "lib", "keelson", "runtime-probe", "last-pass.json"), "utf8"),
      );
      expect(probe.pid).toBe(pids.containerd);
    }
    await waitUntil("workers counted", async () => {
      const c = await cluster();
      return c.numWorkers === 2 && c.workerStatus === "healthy" && c.status === "ok";
    });
  }, 180_000);

  it("stages an image archive on a worker through its agent: imported by the real ctr, listed by the runtime", async () => {
    const archive = join(scratch, "images-e2e.tar");
    writeOciArchive(join(scratch, "oci"), archive, "example.com/keelson/e2e-bundle:1.0");
    const uploaded = await fetch(`${server.url}/v1/imageArchives`, {
      method: "POST",
      headers: { "x-auth-token": ADMIN, "content-type": "application/octet-stream" },
      body: readFileSync(archive),
    });
    expect(uploaded.status).toBe(200);
    const stored = (await uploaded.json()) as { sha256: string; images: string[] };
    expect(stored.images).toEqual(["example.com/keelson/e2e-bundle:1.0"]);
    const staged = await api<{ imported: boolean; listed: string[] }>(
      `${server.url}/v1/hosts/${ids["worker-12"]}/images`,
      ADMIN,
      { method: "POST", body: { name: "e2e-bundle", sha256: stored.sha256 } },
    );
    expect(staged.status, JSON.stringify(staged.body)).toBe(200);
    expect(staged.body.imported).toBe(true);
    expect(staged.body.listed).toContain("example.com/keelson/e2e-bundle:1.0");
    // The host's own containerd lists it, and the archive stays among its user images.
    const hostRoot = (dirs["worker-12"] as NodeHostDirs).hostRoot;
    const listed = execFileSync(
      "ctr",
      ["--address", join(hostRoot, "run", "containerd", "containerd.sock"), "-n", "k8s.io", "images", "ls", "-q"],
      { encoding: "utf8" },
    );
    expect(listed.split("\n")).toContain("example.com/keelson/e2e-bundle:1.0");
    expect(existsSync(join(hostRoot, "var", "lib", "keelson", "images", "e2e-bundle.tar"))).toBe(true);
    const asked = await api<{ listed: string[] }>(`${server.url}/v1/hosts/${ids["worker-12"]}/images`, ADMIN);
    expect(asked.body.listed).toContain("example.com/keelson/e2e-bundle:1.0");
    // The node stays ok: its "load user images" phase finds the archive imported.
    await waitNodeOk("worker-12", 15);
  }, 60_000);

  it("resumes a node after its agent restarts, without restarting the node's services", async () => {
    const d = dirs["worker-12"] as NodeHostDirs;
    const before = liveServicePids(d);
    const old = agents["worker-12"] as AgentProc;
    expect(await old.stop("SIGTERM", 15_000)).toBe(0);
    // The services outlive their agent, as systemd units would.
    expect(liveServicePids(d)).toEqual(before);
    agents["worker-12"] = await startAgent({
      name: "worker-12",
      controlPlane: server.url,
      stateDir: old.stateDir,
      env: nodeHostEnv(d, "127.0.0.12"),
    });
    await waitUntil(
      "worker-12 back",
      async () => await node("worker-12").then((n) => (n as NodeV4 & { agentConnected: boolean }).agentConnected),
      60_000,
    );
    const local = await waitUntil(
      "worker-12 resumed ok",
      async () => {
        const record = await localHost("worker-12");
        return record.clusterUuid === clusterId && record.nodeStatus === "ok" ? record : undefined;
      },
      60_000,
    );
    expect(local.phases.filter((p) => p.state === "running")).toHaveLength(14);
    expect(liveServicePids(d)).toEqual(before);
    // The agent's own record says ok as it sends the report that says so to the control plane:
    // the API shows it once that report is stored.
    await waitUntil("worker-12 ok through the API", async () => (await node("worker-12")).status === "ok", 10_000);
    expect(liveServicePids(d)).toEqual(before);
  }, 120_000);

  it("shows a broken host converging, then failed with the phase's error, and recovers once fixed", async () => {
    const seen: string[] = [];
    setSwap(dirs["worker-13"] as NodeHostDirs, true);
    const failed = await waitUntil(
      "worker-13 failed",
      async () => {
        const record = await host("worker-13");
        if (seen.at(-1) !== record.nodeStatus) seen.push(record.nodeStatus);
        return record.nodeStatus === "failed" ? record : undefined;
      },
      60_000,
      50,
    );
    expect(seen).toContain("converging");
    expect(seen.indexOf("converging")).toBeLessThan(seen.indexOf("failed"));
    const misc = failed.phases.find((p) => p.id === "misc-checks");
    expect(misc?.state).toBe("failed");
    expect(misc?.lastError).toMatch(/swap is on \(\/dev\/sdb1\).*swapoff -a/);
    expect((await node("worker-13")).status).toBe("failed");
    expect(await localHost("worker-13")).toMatchObject({ nodeStatus: "failed", role_status: "failed" });

    setSwap(dirs["worker-13"] as NodeHostDirs, false);
    const recovered = await waitNodeOk("worker-13", 15);
    expect(recovered.phases.find((p) => p.id === "misc-checks")).toMatchObject({ state: "running", lastError: null });
    expect((await node("worker-13")).status).toBe("ok");
  }, 120_000);

  it("detaches a worker: drained, stopped, cleaned, back to an unattached ok node", async () => {
    const d = dirs["worker-13"] as NodeHostDirs;
    const pids = Object.values(liveServicePids(d));
    expect(pids.length).toBe(3);
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/detach`, token, {
      method: "POST",
      body: [{ uuid: ids["worker-13"], isMaster: false }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "worker-13 detached",
      async () => {
        const n = await node("worker-13");
        return n.clusterUuid === null && n.status === "ok";
      },
      60_000,
    );
    expect(await host("worker-13")).toMatchObject({ clusterUuid: null, nodeStatus: "ok", phases: [] });
    expect(await localHost("worker-13")).toMatchObject({ clusterUuid: null, nodeStatus: "ok", phases: [] });
    for (const pid of pids) expect(alive(pid), `pid ${pid}`).toBe(false);
    expectClean(d);
    await waitUntil("one worker left", async () => (await cluster()).numWorkers === 1);
  }, 90_000);

  it("detaches the other worker with PUT nodes/{uuid} and then the last node, the master", async () => {
    const put = await api(`${server.url}/v4/${projectId}/nodes/${ids["worker-12"]}`, token, {
      method: "PUT",
      body: { clusterUuid: null },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await waitUntil("worker-12 detached", async () => (await node("worker-12")).clusterUuid === null, 60_000);
    expectClean(dirs["worker-12"] as NodeHostDirs);

    const masterPids = Object.values(liveServicePids(dirs["master-11"] as NodeHostDirs));
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/detach`, token, {
      method: "POST",
      body: [{ uuid: ids["master-11"], isMaster: true }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "master detached",
      async () => {
        const n = await node("master-11");
        return n.clusterUuid === null && n.status === "ok";
      },
      60_000,
    );
    for (const pid of masterPids) expect(alive(pid), `pid ${pid}`).toBe(false);
    expectClean(dirs["master-11"] as NodeHostDirs);
    await waitUntil("cluster back to pending", async () => {
      const c = await cluster();
      return c.numMasters === 0 && c.status === "pending";
    });
  }, 120_000);
});

function kubeGet(url: string, ca: string, bearer: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { ca, headers: { authorization: `Bearer ${bearer}` } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Nothing the phases wrote is left under the host root, and no service of theirs runs. */
function expectClean(d: NodeHostDirs): void {
  expect(liveServicePids(d)).toEqual({});
  for (const path of [
    ["etc", "keelson"],
    ["etc", "kubernetes"],
    ["etc", "containerd"],
    ["etc", "etcd"],
    ["var", "lib", "etcd"],
    ["var", "lib", "containerd"],
    ["var", "lib", "keelson"],
    ["etc", "cni", "net.d", "10-keelson-flannel.conflist"],
  ]) {
    expect(existsSync(join(d.hostRoot, ...path)), path.join("/")).toBe(false);
  }
}
