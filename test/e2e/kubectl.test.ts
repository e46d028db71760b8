import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { loadSecretCipher } from "../../packages/control-plane/src/secrets/cipher.ts";
import { clusters } from "../../packages/db/src/schema.ts";
import { issue, kubeconfig } from "../support/kube-pki.ts";
import type { AgentProc } from "./support/agents.ts";
import { buildCluster, startNodeAgents, tearDownHosts } from "./support/node-checks.ts";
import { liveServicePids, type NodeHostDirs } from "./support/node-hosts.ts";
import { api, openServerStore, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * The real kubectl against a cluster Keelson built: keelson-server and two real agents (a
 * master and a worker, the test node package), the kubeconfigs downloaded through the API
 * (bearer token, and force_cert_auth=true), and kubectl run with them as an operator would:
 * the nodes with their roles and readiness, /readyz, the kube-dns Service the master applied;
 * a forged token, an expired certificate of the cluster CA and a certificate without the
 * admins' group refused. The kubeconfigs are used as downloaded: the API endpoint is the
 * master's own address (127.0.0.81:443), which this machine reaches directly. The cluster's
 * read values are compared with what the phases started.
 */

const ADMIN = "e2e-admin-token";
const HOSTS = [
  { name: "master-81", ip: "127.0.0.81", isMaster: true },
  { name: "worker-82", ip: "127.0.0.82", isMaster: false },
] as const;

interface KubeNodeJson {
  metadata: { name: string; labels: Record<string, string> };
  status: { conditions: { type: string; status: string }[] };
}

describe("kubectl against a Keelson cluster", () => {
  let server: ServerProc;
  let projectId: string;
  let clusterId: string;
  const scratch = tempDir("keelson-e2e-kubectl-");
  const agents: Record<string, AgentProc> = {};
  const dirs: Record<string, NodeHostDirs> = {};
  const ids: Record<string, string> = {};
  const files: Record<"bearer" | "cert", string> = { bearer: "", cert: "" };

  /** The real kubectl with a kubeconfig file; never a cached discovery of another run. */
  const kubectl = (file: string, args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        "kubectl",
        ["--kubeconfig", file, "--cache-dir", join(scratch, "kube-cache"), "--request-timeout=20s", ...args],
        { encoding: "utf8", timeout: 60_000, env: { PATH: process.env.PATH ?? "", HOME: scratch } },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
    });

  const download = async (forceCert: boolean) => {
    const res = await fetch(
      `${server.url}/v4/${projectId}/kubeconfig/${clusterId}${forceCert ? "?force_cert_auth=true" : ""}`,
      { headers: { "x-auth-token": ADMIN } },
    );
    expect(res.status).toBe(200);
    return res.text();
  };

  beforeAll(async () => {
    server = await startServer({ adminToken: ADMIN, env: { KEELSON_AGENT_HEARTBEAT_MS: "2000" } });
    const projects = await api<{ projects: { id: string; name: string }[] }>(`${server.url}/v1/projects`, ADMIN);
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
    await startNodeAgents({ serverUrl: server.url, token: ADMIN, projectId, hosts: HOSTS, scratch, agents, dirs, ids });
    clusterId = await buildCluster(
      server.url,
      ADMIN,
      projectId,
      { name: "e2e-kubectl", containersCidr: "10.80.0.0/16", servicesCidr: "10.81.0.0/16", privileged: true },
      HOSTS.map((h) => ({ uuid: ids[h.name] as string, isMaster: h.isMaster })),
      180_000,
    );
    for (const kind of ["bearer", "cert"] as const) {
      files[kind] = join(scratch, `${kind}.kubeconfig`);
      writeFileSync(files[kind], await download(kind === "cert"), { mode: 0o600 });
    }
  }, 240_000);

  afterAll(() => tearDownHosts({ agents, server, dirs, scratch }), 60_000);

  it("both kubeconfigs name the master's API and carry their credential, as kubectl reads them", async () => {
    const view = async (file: string, path: string) =>
      (await kubectl(file, ["config", "view", "--raw", "-o", `jsonpath={${path}}`])).stdout;
    for (const file of [files.bearer, files.cert]) {
      expect(await view(file, ".clusters[0].cluster.server")).toBe("https://127.0.0.81:443");
    }
    expect(await view(files.bearer, ".users[0].user.token")).toMatch(/^kct_/);
    expect(await view(files.cert, ".users[0].user.client-certificate-data")).toMatch(/^[A-Za-z0-9+/]+=*$/);
  });

  for (const kind of ["bearer", "cert"] as const) {
    it(`${kind}: kubectl lists the nodes with their roles and Ready, and /readyz answers ok`, async () => {
      const listed = await kubectl(files[kind], ["get", "nodes", "-o", "json"]);
      expect(listed.stderr).toBe("");
      expect(listed.code).toBe(0);
      const nodes = (JSON.parse(listed.stdout) as { items: KubeNodeJson[] }).items;
      const summary = nodes
        .map((n) => ({
          name: n.metadata.name,
          master: "node-role.kubernetes.io/master" in n.metadata.labels,
          worker: "node-role.kubernetes.io/worker" in n.metadata.labels,
          ready: n.status.conditions.find((c) => c.type === "Ready")?.status,
        }))
        .sort((a, b) => a.name.localeCompare(b.name));
      expect(summary).toEqual([
        { name: "127.0.0.81", master: true, worker: false, ready: "True" },
        { name: "127.0.0.82", master: false, worker: true, ready: "True" },
      ]);
      const table = await kubectl(files[kind], ["get", "nodes"]);
      expect(table.stdout).toMatch(/^127\.0\.0\.81\s+Ready\s+control-plane,master\s/m);
      expect(table.stdout).toMatch(/^127\.0\.0\.82\s+Ready\s+worker\s/m);
      expect(await kubectl(files[kind], ["get", "--raw", "/readyz"])).toMatchObject({ code: 0, stdout: "ok" });
    });
  }

  it("the master applied kube-dns at the kubelets' clusterDNS address and the admins' ClusterRoleBinding", async () => {
    const svc = JSON.parse(
      (await kubectl(files.cert, ["get", "svc", "kube-dns", "-n", "kube-system", "-o", "json"])).stdout,
    );
    const workerKubelet = JSON.parse(
      readFileSync(
        join((dirs["worker-82"] as NodeHostDirs).hostRoot, "etc", "kubernetes", "kubelet-config.json"),
        "utf8",
      ),
    );
    expect(svc.spec.clusterIP).toBe("10.81.0.10");
    expect(workerKubelet.clusterDNS).toEqual([svc.spec.clusterIP]);
    // Its endpoint is the master's CoreDNS (a host service on the master's address).
    const slices = JSON.parse(
      (
        await kubectl(files.cert, [
          "get",
          "endpointslices",
          "-n",
          "kube-system",
          "-l",
          "kubernetes.io/service-name=kube-dns",
          "-o",
          "json",
        ])
      ).stdout,
    );
    expect(
      slices.items.flatMap((s: { endpoints: { addresses: string[] }[] }) => s.endpoints.flatMap((e) => e.addresses)),
    ).toEqual(["127.0.0.81"]);
    const binding = JSON.parse(
      (await kubectl(files.bearer, ["get", "clusterrolebinding", "keelson:cluster-admins", "-o", "json"])).stdout,
    );
    expect(binding.roleRef.name).toBe("cluster-admin");
    expect(binding.subjects).toEqual([
      { apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "keelson:cluster-admins" },
    ]);
  });

  it("a forged token, an expired certificate and a certificate outside the admins' group are refused", async () => {
    const forged = join(scratch, "forged.kubeconfig");
    writeFileSync(forged, readFileSync(files.bearer, "utf8").replace(/kct_[A-Za-z0-9_-]+/, `kct_${"x".repeat(43)}`));
    for (const args of [
      ["get", "nodes"],
      ["get", "--raw", "/readyz"],
    ]) {
      const r = await kubectl(forged, args);
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toContain("error: You must be logged in to the server (Unauthorized)");
    }

    // Certificates of the cluster's own CA, whose key the control plane keeps sealed in its store.
    const store = await openServerStore(server.dataDir);
    const [row] = await store.db
      .select({ cert: clusters.caCertPem, key: clusters.caKeyEnc })
      .from(clusters)
      .where(eq(clusters.id, clusterId));
    await store.close();
    const caFile = join(scratch, "cluster-ca.crt");
    const keyFile = join(scratch, "cluster-ca.key");
    writeFileSync(caFile, row?.cert as string);
    writeFileSync(keyFile, loadSecretCipher(server.dataDir).decrypt(row?.key as string), { mode: 0o600 });
    const server81 = "https://127.0.0.81:443";
    const write = (name: string, user: { cert: string; key: string }) => {
      const file = join(scratch, `${name}.kubeconfig`);
      writeFileSync(file, kubeconfig(server81, row?.cert as string, user));
      return file;
    };
    const ca = { certFile: caFile, keyFile };
    const expired = write(
      "expired",
      issue(join(scratch, "certs"), ca, { cn: "admin", groups: ["keelson:cluster-admins"], expired: true }),
    );
    const r = await kubectl(expired, ["get", "nodes"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: You must be logged in to the server (Unauthorized)");
    // The same CA, in date, without the group: authenticated, and RBAC has no binding for it.
    const outsider = write("outsider", issue(join(scratch, "certs"), ca, { cn: "mallory" }));
    const o = await kubectl(outsider, ["get", "nodes"]);
    expect(o.code).toBe(1);
    expect(o.stderr).toContain(
      'Error from server (Forbidden): nodes is forbidden: User "mallory" cannot list resource "nodes" in API group "" at the cluster scope',
    );
  });

  it("the read values say what runs: authzEnabled, enableEtcdEncryption and privileged against the started flags", async () => {
    const read = (await api<Record<string, unknown>>(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN))
      .body;
    const master = dirs["master-81"] as NodeHostDirs;
    const cmdline = (service: string) => {
      const pid = liveServicePids(master)[service];
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    };
    const apiserver = cmdline("kube-apiserver");
    expect(apiserver).toContain("--authorization-mode=Node,RBAC");
    expect(read.authzEnabled).toBe(1);
    expect(apiserver).toContain("--allow-privileged=true");
    expect(read.privileged).toBe(1);
    // ...and the API server takes a privileged container (it refuses one with --allow-privileged=false).
    const run = await kubectl(files.cert, ["run", "priv", "--image=busybox", "--restart=Never", "--privileged"]);
    expect(run.stdout).toContain("pod/priv created");
    const etcd = readFileSync(join(master.hostRoot, "etc", "etcd", "etcd.env"), "utf8");
    expect(etcd).toMatch(/^ETCD_LISTEN_CLIENT_URLS="https:/m);
    expect(etcd).toContain('ETCD_CLIENT_CERT_AUTH="true"');
    expect(etcd).toContain('ETCD_PEER_CLIENT_CERT_AUTH="true"');
    expect(read.enableEtcdEncryption).toBe("true");
  });
  it("the web CLI: a session opened with a web CLI token runs kubectl get nodes against this cluster", async () => {
    const issued = await fetch(`${server.url}/v4/${projectId}/webcli/${clusterId}`, {
      method: "POST",
      headers: { "x-auth-token": ADMIN },
    });
    expect(issued.status).toBe(200);
    const { token } = (await issued.json()) as { token: string };
    const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/v1/webcli/session?cluster=${clusterId}`);
    const frames: { type: string; [key: string]: unknown }[] = [];
    ws.on("message", (data) => frames.push(JSON.parse(String(data))));
    const closed = new Promise<number>((resolve) => ws.on("close", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    const until = async (type: string) => {
      const deadline = Date.now() + 60_000;
      while (!frames.some((f) => f.type === type || f.type === "error")) {
        if (Date.now() > deadline) throw new Error(`no ${type}: ${JSON.stringify(frames)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      ws.send(JSON.stringify({ type: "auth", token }));
      await until("ready");
      expect(frames[0]).toEqual({ type: "ready", cluster: clusterId });
      ws.send(JSON.stringify({ type: "input", data: "kubectl get nodes" }));
      await until("exit");
      const out = (stream: string) =>
        frames
          .filter((f) => f.type === "output" && f.stream === stream)
          .map((f) => f.data)
          .join("");
      expect(
        frames.find((f) => f.type === "exit"),
        out("stderr"),
      ).toEqual({ type: "exit", code: 0 });
      expect(out("stdout")).toMatch(/^127\.0\.0\.81\s+Ready\s+control-plane,master\s/m);
      expect(out("stdout")).toMatch(/^127\.0\.0\.82\s+Ready\s+worker\s/m);
      ws.send(JSON.stringify({ type: "input", data: "exit" }));
      expect(await closed).toBe(1000);
    } finally {
      ws.terminate();
    }
  });

  it("a detached worker's Node is gone once the detach finishes (a master deletes it; its kubelet may not)", async () => {
    const res = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}/detach`, ADMIN, {
      method: "POST",
      body: [{ uuid: ids["worker-82"], isMaster: false }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await waitUntil(
      "the detach finished",
      async () => {
        const c = await api<{ numWorkers: number; taskStatus: string }>(
          `${server.url}/v4/${projectId}/clusters/${clusterId}`,
          ADMIN,
        );
        return c.body.numWorkers === 0 && c.body.taskStatus === "success";
      },
      60_000,
    );
    // No wait for the masters' 30 s status pass: the detach asked the master to sweep before it finished.
    const got = await kubectl(files.cert, ["get", "nodes", "-o", "json"]);
    expect(got.code, got.stderr).toBe(0);
    expect((JSON.parse(got.stdout).items as KubeNodeJson[]).map((n) => n.metadata.name)).toEqual(["127.0.0.81"]);
  }, 90_000);
});
