import { createHash } from "node:crypto";
import { Resolver } from "node:dns/promises";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeConfig } from "../../src/phases/config.ts";
import { PhaseEngine } from "../../src/phases/engine.ts";
import { applyBootstrapObjects } from "../../src/phases/impl/bootstrap-objects.ts";
import { ALL_PHASES } from "../../src/phases/impl/index.ts";
import { cleanNode } from "../../src/phases/index.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { Reconciler } from "../../src/phases/reconciler.ts";
import type { PhaseContext } from "../../src/phases/types.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { processStartTime } from "../../src/services/process-info.ts";
import { createTestCa, fakeHost, freePorts, MASTER_CERT_PROFILES, nodeConfig, tempDir, testLog } from "./helpers.ts";
import { reconcileUntilOk, wholeNode } from "./whole-node.ts";

/**
 * One master, every phase, real processes: the real etcd from the node package and the
 * stand-ins, under a temporary host root, on 127.0.0.11.
 */

const IP = "127.0.0.11";
const TOKEN = "kubeconfig-token-of-the-cluster";
let root: string;
let config: NodeConfig;
let services: DirectSupervisor;
let engine: PhaseEngine;
let signed: string[];
let ca: Awaited<ReturnType<typeof createTestCa>>;

beforeAll(async () => {
  root = tempDir("master");
  ca = await createTestCa(join(root, "test-ca"));
  signed = ca.signed;
  config = nodeConfig({
    hostRoot: join(root, "host"),
    primaryIp: IP,
    ports: await freePorts(IP),
    cluster: {
      containersCidr: "10.20.0.0/16",
      servicesCidr: "10.21.0.0/16",
      networkPlugin: "calico",
      mtuSize: "1400",
      etcdHeartbeatIntervalMs: 50,
      etcdElectionTimeoutMs: 500,
      dockerPrivateRegistry: "registry.example.com:5000",
      cpuManagerPolicy: "none",
    },
    host: fakeHost(root),
    bouncer: {
      tokens: [
        { sha256: createHash("sha256").update(TOKEN).digest("hex"), username: "admin@c1", groups: ["system:masters"] },
      ],
    },
  });
  ({ services, engine } = wholeNode(root, config, ca.signCsr));
}, 30_000);

afterAll(() => {
  services?.close();
  if (root) {
    killAllFromPidFiles(join(root, "host"));
    rmSync(root, { recursive: true, force: true });
  }
});

function apiGet(
  path: string,
  auth: { token?: string; cert?: boolean },
  method = "GET",
  patch?: unknown,
): Promise<{ status: number; body: string }> {
  const pki = join(config.hostRoot, "etc", "keelson", "pki");
  return new Promise((resolve, reject) => {
    const req = https.request(
      `https://${IP}:${config.ports.apiServer}${path}`,
      {
        method,
        ca: readFileSync(join(pki, "ca.crt")),
        ...(auth.cert
          ? { cert: readFileSync(join(pki, "kubelet.crt")), key: readFileSync(join(pki, "kubelet.key")) }
          : {}),
        headers: {
          ...(auth.token ? { authorization: `Bearer ${auth.token}` } : {}),
          ...(patch === undefined ? {} : { "content-type": "application/merge-patch+json" }),
        },
      },
      (res) => {
        let body = "";
        res.on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(patch === undefined ? undefined : JSON.stringify(patch));
  });
}

describe("all phases on one master", () => {
  it("starts every phase to running and the node is ok", async () => {
    await reconcileUntilOk(engine);
    const list = engine.list();
    expect(list.filter((p) => p.state !== "running").map((p) => p.id)).toEqual(["drain-pods"]);
    expect(engine.nodeStatus).toBe("ok");
    expect(list.find((p) => p.id === "app-catalog")?.message).toMatch(/deprecated/);
    expect(list.find((p) => p.id === "keepalived")?.message).toMatch(/not set: keepalived is not needed/);
    expect(list.find((p) => p.id === "load-user-images")?.message).toMatch(/no user images/);
    expect(new Set(signed)).toEqual(new Set(MASTER_CERT_PROFILES));
    expect(Object.keys(services.livePids()).sort()).toEqual(
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
  }, 60_000);

  it("wrote the configuration the cluster spec asks for", () => {
    const h = config.hostRoot;
    const env = readFileSync(join(h, "etc", "keelson", "node.env"), "utf8");
    expect(env).toContain('PRIMARY_IP="127.0.0.11"');
    expect(env).toContain('NETWORK_PLUGIN="calico"');
    expect(env).toContain('CLUSTER_DNS_IP="10.21.0.10"');
    const cni = JSON.parse(readFileSync(join(h, "etc", "cni", "net.d", "10-keelson-calico.conflist"), "utf8"));
    expect(cni.plugins[0]).toMatchObject({ type: "calico", mtu: 1400, ipam: { ipv4_pools: ["10.20.0.0/16"] } });
    expect(readFileSync(join(h, "etc", "containerd", "config.toml"), "utf8")).toContain(
      '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n  endpoint = ["https://registry.example.com:5000"]',
    );
    const etcdEnv = readFileSync(join(h, "etc", "etcd", "etcd.env"), "utf8");
    expect(etcdEnv).toContain('ETCD_HEARTBEAT_INTERVAL="50"');
    expect(etcdEnv).toContain('ETCD_ELECTION_TIMEOUT="500"');
    expect(etcdEnv).toContain('ETCD_INITIAL_CLUSTER_STATE="new"');
    expect(etcdEnv).toContain(`ETCD_LISTEN_CLIENT_URLS="https://${IP}:${config.ports.etcdClient}"`);
  });

  it("serves the Kubernetes API with the node labelled and tainted, and authenticates through the bouncer", async () => {
    const node = await apiGet(`/api/v1/nodes/${config.nodeName}`, { cert: true });
    expect(node.status).toBe(200);
    const body = JSON.parse(node.body);
    expect(body.metadata.labels).toMatchObject({ "node-role.kubernetes.io/master": "", "keelson.io/cluster": "c1" });
    expect(body.spec.taints).toContainEqual({ key: "node-role.kubernetes.io/master", effect: "NoSchedule" });
    expect(body.spec.unschedulable).toBeFalsy();
    // What node-taints did before: as the node's kubelet, the real NodeRestriction refusals.
    const path = `/api/v1/nodes/${config.nodeName}`;
    const asKubelet = async (method: string, patch?: unknown) => {
      const answer = await apiGet(path, { cert: true }, method, patch);
      return { status: answer.status, message: JSON.parse(answer.body).message };
    };
    const label = { metadata: { labels: { "node-role.kubernetes.io/control-plane": null } } };
    expect(await asKubelet("PATCH", label)).toEqual({
      status: 403,
      message: `nodes "${config.nodeName}" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/control-plane`,
    });
    expect(await asKubelet("PATCH", { spec: { taints: [] } })).toEqual({
      status: 403,
      message: `nodes "${config.nodeName}" is forbidden: node "${config.nodeName}" is not allowed to modify taints`,
    });
    expect(await asKubelet("DELETE")).toEqual({
      status: 403,
      message: `nodes "${config.nodeName}" is forbidden: User "system:node:${config.nodeName}" cannot delete resource "nodes" in API group "" at the cluster scope`,
    });
    // A token the control plane issued passes the node bouncer; anything else does not.
    expect((await apiGet("/api/v1/nodes", { token: TOKEN })).status).toBe(200);
    expect((await apiGet("/api/v1/nodes", { token: "forged" })).status).toBe(401);
    // No credential at all is the anonymous user (--anonymous-auth defaults to true), whom RBAC
    // refuses: 403, as the real apiserver answers.
    const anonymous = await apiGet("/api/v1/nodes", {});
    expect(anonymous.status).toBe(403);
    expect(JSON.parse(anonymous.body).message).toBe(
      'nodes is forbidden: User "system:anonymous" cannot list resource "nodes" in API group "" at the cluster scope',
    );
  });

  it("runs kube-controller-manager and kube-scheduler, each holding its Lease in etcd through the API", async () => {
    const leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    for (const name of ["kube-controller-manager", "kube-scheduler"]) {
      let lease: { status: number; body: string } = { status: 0, body: "" };
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        lease = await apiGet(`${leases}/${name}`, { token: TOKEN });
        if (lease.status === 200 && JSON.parse(lease.body).spec?.holderIdentity) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(lease.status, name).toBe(200);
      const spec = JSON.parse(lease.body).spec;
      expect(spec.holderIdentity, name).toMatch(/_[0-9a-f-]{36}$/);
      expect(spec.leaseDurationSeconds, name).toBe(15);
    }
    const args = (name: string) =>
      readFileSync(`/proc/${services.livePids()[name]}/cmdline`, "utf8").split("\0").filter(Boolean);
    const cm = args("kube-controller-manager");
    expect(cm).toContain("--leader-elect=true");
    expect(cm).toContain("--allocate-node-cidrs=true");
    expect(cm).toContain("--cluster-cidr=10.20.0.0/16");
    expect(cm).toContain("--service-cluster-ip-range=10.21.0.0/16");
    expect(cm).toContain("--use-service-account-credentials=true");
    expect(args("kube-scheduler")).toContain("--leader-elect=true");
  });

  it("applies the cluster's bootstrap objects through the API, and re-applies one deleted", async () => {
    const BINDING = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/keelson:cluster-admins";
    const DNS = "/api/v1/namespaces/kube-system/services/kube-dns";
    const binding = JSON.parse((await apiGet(BINDING, { token: TOKEN })).body);
    expect(binding.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "ClusterRole",
      name: "cluster-admin",
    });
    expect(binding.subjects).toEqual([
      { apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "keelson:cluster-admins" },
    ]);
    const dns = JSON.parse((await apiGet(DNS, { token: TOKEN })).body);
    // The address the kubelets are given as clusterDNS.
    const kubeletConfig = JSON.parse(
      readFileSync(join(config.hostRoot, "etc", "kubernetes", "kubelet-config.json"), "utf8"),
    );
    expect(dns.spec.clusterIP).toBe("10.21.0.10");
    expect(kubeletConfig.clusterDNS).toEqual([dns.spec.clusterIP]);
    // Backed by this master's CoreDNS: a slice of the selectorless Service with its address.
    expect(dns.spec.selector).toBeUndefined();
    const slice = JSON.parse(
      (
        await apiGet(
          `/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices/kube-dns-${config.nodeName.toLowerCase()}`,
          {
            token: TOKEN,
          },
        )
      ).body,
    );
    expect(slice.metadata.labels["kubernetes.io/service-name"]).toBe("kube-dns");
    expect(slice.endpoints).toEqual([{ addresses: [IP], conditions: { ready: true }, nodeName: config.nodeName }]);
    // And it answers: kube-dns and kubernetes.default resolve through this master's CoreDNS (the
    // stand-in, reading the API as this master's kubelet with the system:coredns binding).
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`${IP}:${config.ports.corednsDns}`]);
    const resolved = async (name: string) => {
      for (let i = 0; ; i++) {
        try {
          return await resolver.resolve4(name);
        } catch (err) {
          if (i >= 50) throw err;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    };
    expect(await resolved("kube-dns.kube-system.svc.cluster.local")).toEqual([dns.spec.clusterIP]);
    expect(await resolved("kubernetes.default.svc.cluster.local")).toEqual(["10.21.0.1"]);
    const missing = await resolver.resolve4("nope.kube-system.svc.cluster.local").catch((e) => e.code);
    expect(missing).toBe("ENOTFOUND");

    expect((await apiGet(BINDING, { token: TOKEN }, "DELETE")).status).toBe(200);
    const status = await engine.status();
    expect(status).toMatchObject({ ok: false, failed: "wait-for-services" });
    expect(status.error).toContain("ClusterRoleBinding keelson:cluster-admins is missing");
    const reconciler = new Reconciler(engine, testLog(), { checkIntervalMs: 50, retryIntervalMs: 10 });
    reconciler.run();
    const deadline = Date.now() + 20_000;
    while ((await apiGet(BINDING, { token: TOKEN })).status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    while (engine.nodeStatus !== "ok" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await reconciler.halt();
    expect((await apiGet(BINDING, { token: TOKEN })).status).toBe(200);
    expect(engine.nodeStatus).toBe("ok");

    // Two masters applying at once: the one whose create comes second finds it there (409), not a failure.
    expect((await apiGet(BINDING, { token: TOKEN }, "DELETE")).status).toBe(200);
    const ctx = { config, paths: nodePaths(config.hostRoot), signal: new AbortController().signal } as PhaseContext;
    const both = await Promise.all([applyBootstrapObjects(ctx), applyBootstrapObjects(ctx)]);
    expect(both.flat().filter((c) => c.startsWith("created ClusterRoleBinding"))).toHaveLength(1);
  }, 30_000);

  it("runs a worker's 15 phases against the master's API, and detaches it again", async () => {
    const workerIp = "127.0.0.12";
    const workerConfig = nodeConfig({
      hostRoot: join(root, "worker"),
      primaryIp: workerIp,
      role: "worker",
      ports: await freePorts(workerIp),
      apiServerUrl: `https://${IP}:${config.ports.apiServer}`,
      cluster: config.cluster,
      host: config.host,
    });
    const workerServices = new DirectSupervisor({ hostRoot: workerConfig.hostRoot, log: testLog() });
    try {
      const worker = new PhaseEngine({
        config: workerConfig,
        phases: ALL_PHASES,
        stateFile: join(root, "worker-state", "phases.json"),
        log: testLog(),
        services: workerServices,
        signCsr: ca.signCsr,
        phaseTimeoutMs: 30_000,
      });
      // The worker's role label comes from a master's status pass (node-roles.ts): run them meanwhile.
      let masterPasses = true;
      const passes = (async () => {
        while (masterPasses) {
          await engine.status();
          await new Promise((r) => setTimeout(r, 300));
        }
      })();
      const started = await worker.start().finally(() => {
        masterPasses = false;
      });
      await passes;
      expect(started, JSON.stringify(worker.list().find((p) => p.state === "failed"))).toEqual({ ok: true });
      expect(worker.list()).toHaveLength(15);
      expect(worker.allRunning()).toBe(true);
      expect(Object.keys(workerServices.livePids()).sort()).toEqual(["containerd", "kube-proxy", "kubelet"]);
      const registered = JSON.parse((await apiGet(`/api/v1/nodes/${workerConfig.nodeName}`, { cert: true })).body);
      expect(registered.metadata.labels).toHaveProperty(["node-role.kubernetes.io/worker"], "");
      expect(registered.spec.taints ?? []).toEqual([]);

      expect(await worker.stop({ intent: "detach" })).toEqual({ ok: true });
      expect(workerServices.livePids()).toEqual({});
      // The Node authorizer grants a kubelet no delete of Node objects (bootstrappolicy.NodeRules):
      // the kubelet marks its own Node (NodeRestriction lets it set a keelson.io label) and the
      // master's sweep deletes it with the control-plane credential.
      expect(worker.list().find((p) => p.id === "kubelet")?.message).toBe(
        `node ${workerConfig.nodeName} marked keelson.io/detached=true: a master of the cluster deletes it (a kubelet may not)`,
      );
      const marked = JSON.parse((await apiGet(`/api/v1/nodes/${workerConfig.nodeName}`, { token: TOKEN })).body);
      expect(marked.metadata.labels).toHaveProperty(["keelson.io/detached"], "true");
      expect(await engine.sweep()).toEqual({ labelled: [], removed: [workerConfig.nodeName] });
      expect((await apiGet(`/api/v1/nodes/${workerConfig.nodeName}`, { token: TOKEN })).status).toBe(404);
      expect(await engine.sweep()).toEqual({ labelled: [], removed: [] });
    } finally {
      workerServices.close();
      killAllFromPidFiles(workerConfig.hostRoot);
    }
  }, 60_000);

  it("re-checks status, then repairs a stopped service from its phase without redoing the lower ones", async () => {
    expect(await engine.status()).toEqual({ ok: true });
    const repairs: string[] = [];
    const executing: string[] = [];
    engine.on("change", (list) => {
      for (const p of list) if (p.state === "executing" && executing.at(-1) !== p.id) executing.push(p.id);
    });
    const reconciler = new Reconciler(engine, testLog(), { checkIntervalMs: 50, retryIntervalMs: 10 }, (kind) =>
      repairs.push(kind),
    );
    reconciler.run();
    await new Promise((r) => setTimeout(r, 100));
    // Everything already ran: the loop only checked.
    expect(executing).toEqual([]);
    expect(engine.nodeStatus).toBe("ok");

    const kubeProxyPid = services.livePids()["kube-proxy"]!;
    await services.stop("kube-proxy");
    expect(processStartTime(kubeProxyPid)).toBeUndefined();
    const deadline = Date.now() + 20_000;
    while (!(repairs.length > 0 && engine.nodeStatus === "ok") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await reconciler.halt();
    expect(engine.nodeStatus).toBe("ok");
    expect(repairs).toEqual(["resume"]);
    expect(services.livePids()["kube-proxy"]).toBeGreaterThan(0);
    // Stopped down to kube-proxy (not the drain) and started again from it.
    expect(executing[0]).toBe("coredns");
    expect(executing).toContain("kube-proxy");
    expect(executing).not.toContain("gen-certs");
    expect(executing).not.toContain("drain-pods");
    expect(executing).not.toContain("kubelet");
  }, 30_000);

  it("goes converging then failed with the phase's error when the host breaks, and recovers once fixed", async () => {
    const signedBefore = signed.length;
    const swaps = join(config.host.procRoot, "swaps");
    const healthy = readFileSync(swaps, "utf8");
    writeFileSync(swaps, `${healthy}/dev/sdb1 partition 1048572 0 -2\n`);
    const statuses: string[] = [];
    const onStatus = (s: string) => statuses.push(s);
    engine.on("node-status", onStatus);
    const reconciler = new Reconciler(engine, testLog(), {
      checkIntervalMs: 50,
      retryIntervalMs: 20,
      maxRetryIntervalMs: 40,
      retryBudget: 2,
      failedRetryIntervalMs: 300,
    });
    reconciler.run();
    const waitFor = async (what: string, probe: () => boolean) => {
      const deadline = Date.now() + 30_000;
      while (!probe()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(engine.list())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await waitFor("failed", () => engine.nodeStatus === "failed");
    expect(statuses.slice(0, 2)).toEqual(["converging", "failed"]);
    const misc = engine.list().find((p) => p.id === "misc-checks")!;
    expect(misc.state).toBe("failed");
    expect(misc.lastError).toMatch(/swap is on \(\/dev\/sdb1\).*swapoff -a/);
    // The phases above the failed one were stopped on the way down and not started again.
    expect(services.livePids().kubelet).toBeUndefined();

    writeFileSync(swaps, healthy);
    await waitFor("ok", () => engine.nodeStatus === "ok");
    await reconciler.halt();
    engine.off("node-status", onStatus);
    // The third attempt was a full restart: certificates were reused, none signed again.
    expect(engine.list().find((p) => p.id === "gen-certs")?.message).toBe(
      "certificates present and valid: reused, not regenerated",
    );
    expect(signed).toHaveLength(signedBefore);
    expect(engine.allRunning()).toBe(true);
    expect(engine.list().find((p) => p.id === "misc-checks")?.lastError).toBeNull();
    expect(Object.keys(services.livePids())).toHaveLength(9);
  }, 60_000);

  it("stops everything (draining first), leaves no process behind, and cleans the node", async () => {
    const pids = Object.values(services.livePids());
    expect(pids.length).toBe(9);
    const result = await engine.stop({ intent: "detach" });
    expect(result).toEqual({ ok: true });
    expect(engine.list().every((p) => p.state === "stopped")).toBe(true);
    expect(engine.list().find((p) => p.id === "drain-pods")?.message).toMatch(/cordoned; evicted 0 pod/);
    // Detached for good: its CoreDNS left kube-dns while its API still answered.
    expect(engine.list().find((p) => p.id === "wait-for-services")?.message).toBe(
      "this master's CoreDNS removed from kube-dns",
    );
    for (const pid of pids) expect(processStartTime(pid)).toBeUndefined();
    expect(services.livePids()).toEqual({});
    expect(existsSync(join(config.hostRoot, "var", "lib", "etcd"))).toBe(false);
    await cleanNode(engine.paths, services);
    expect(existsSync(join(config.hostRoot, "etc", "keelson"))).toBe(false);
    expect(existsSync(join(config.hostRoot, "etc", "kubernetes"))).toBe(false);
  }, 30_000);
});
