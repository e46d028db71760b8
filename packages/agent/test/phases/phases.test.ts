import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { NodeConfig, NodeConfigInput } from "../../src/phases/config.ts";
import { certRequests } from "../../src/phases/impl/certs.ts";
import { renderContainerdConfig } from "../../src/phases/impl/containerd-config.ts";
import { parseMemberList } from "../../src/phases/impl/etcd.ts";
import { kubelet } from "../../src/phases/impl/kube-services.ts";
import { appCatalog, keepalived } from "../../src/phases/impl/masters.ts";
import { cniFiles, configureCni, networkConfig } from "../../src/phases/impl/network.ts";
import { drainPods, nodeTaints, uncordon } from "../../src/phases/impl/node-api.ts";
import { DETACHED_LABEL, kubeletNodeLabels, WORKER_LABEL } from "../../src/phases/impl/node-roles.ts";
import { clearDetachedMark, sweepNodes } from "../../src/phases/impl/node-sweep.ts";
import { prepareConfig } from "../../src/phases/impl/prepare-config.ts";
import { cpuSettings } from "../../src/phases/impl/render.ts";
import { configureRuntime } from "../../src/phases/impl/runtime.ts";
import { type KubeApi, KubeApiError, type KubeNode, type PodRef } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { fakeHost, MASTER_CERT_PROFILES, nodeConfig, phaseContexts, tempDir, testLog } from "./helpers.ts";

/** An in-memory Kubernetes API holding nodes and pods, with the merge-patch semantics of the real one. */
class FakeKube implements KubeApi {
  url = "https://fake-apiserver";
  nodes = new Map<string, KubeNode>();
  pods: (PodRef & { node: string })[] = [];
  evicted: string[] = [];
  /** Set on the view a kubelet gets (asKubelet): what NodeRestriction refuses it, it refuses. */
  kubeletOf?: string;
  /** Every write, as "<identity> <verb> <node>". */
  writes: string[] = [];
  async ready() {}
  async getNode(name: string) {
    return structuredClone(this.nodes.get(name));
  }
  async listNodes(labelSelector: string) {
    const terms = labelSelector.split(",").map((t) => t.split("="));
    return [...this.nodes.values()]
      .filter((n) => terms.every(([k, v]) => n.metadata.labels?.[k ?? ""] === v))
      .map((n) => structuredClone(n));
  }
  async patchNode(
    name: string,
    patch: { metadata?: { labels?: Record<string, string | null> }; spec?: KubeNode["spec"] },
  ) {
    const node = this.nodes.get(name);
    if (!node) throw new Error("404");
    if (this.kubeletOf !== undefined) {
      if (name !== this.kubeletOf)
        throw new KubeApiError(`node "${this.kubeletOf}" is not allowed to modify node "${name}"`, 403);
      if (patch.spec?.taints !== undefined)
        throw new KubeApiError(`node "${name}" is not allowed to modify taints`, 403);
      const role = Object.keys(patch.metadata?.labels ?? {}).filter((k) => k.includes("kubernetes.io/"));
      if (role.length > 0) throw new KubeApiError(`is not allowed to modify labels: ${role.join(", ")}`, 403);
    }
    this.writes.push(`${this.kubeletOf === undefined ? "master" : "kubelet"} patch ${name}`);
    const labels: Record<string, string> = { ...node.metadata.labels };
    for (const [key, value] of Object.entries(patch.metadata?.labels ?? {})) {
      if (value === null) delete labels[key];
      else labels[key] = value;
    }
    node.metadata.labels = labels;
    node.spec = { ...node.spec, ...patch.spec };
    return structuredClone(node);
  }
  async deleteNode(name: string) {
    if (this.kubeletOf !== undefined)
      throw new KubeApiError(`User "system:node:${this.kubeletOf}" cannot delete resource "nodes"`, 403);
    this.writes.push(`master delete ${name}`);
    this.nodes.delete(name);
  }
  async listPodsOnNode(nodeName: string) {
    return this.pods.filter((p) => p.node === nodeName);
  }
  async evictPod(pod: PodRef) {
    this.evicted.push(`${pod.namespace}/${pod.name}`);
    this.pods = this.pods.filter((p) => !(p.namespace === pod.namespace && p.name === pod.name));
  }
  /** The same objects, as node `name`'s kubelet sees them. */
  asKubelet(name: string): FakeKube {
    const view = Object.create(this) as FakeKube;
    view.kubeletOf = name;
    return view;
  }
}

/** An API this node cannot reach (no master up, or not yet). */
function unreachable(kube: FakeKube): KubeApi {
  const view = Object.create(kube) as FakeKube;
  view.getNode = () => Promise.reject(new Error("ECONNREFUSED"));
  return view;
}

const roots: string[] = [];
const supervisors: DirectSupervisor[] = [];

function setup({ sharedKube, ...input }: Partial<NodeConfigInput> & { sharedKube?: FakeKube } = {}) {
  const root = tempDir("phase");
  roots.push(root);
  const config: NodeConfig = nodeConfig({
    hostRoot: join(root, "host"),
    primaryIp: "127.0.0.11",
    host: fakeHost(root),
    ...input,
  });
  const services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
  supervisors.push(services);
  const kube = sharedKube ?? new FakeKube();
  kube.nodes.set(config.nodeName, { metadata: { name: config.nodeName, labels: {} }, spec: {} });
  const ctx = phaseContexts({ config, services, kubeApi: kube.asKubelet(config.nodeName), masterKubeApi: kube });
  return { root, config, services, kube, ctx, paths: nodePaths(config.hostRoot) };
}

afterAll(() => {
  for (const s of supervisors) s.close();
  for (const root of roots) {
    killAllFromPidFiles(join(root, "host"));
    rmSync(root, { recursive: true, force: true });
  }
});

describe("configuration rendering", () => {
  it("writes prepare-config files and notices drift", async () => {
    const { ctx, paths } = setup({
      cluster: { cpuManagerPolicy: "static", reservedCPUs: "0", topologyManagerPolicy: "best-effort" },
    });
    await prepareConfig.start(ctx());
    const kubelet = JSON.parse(readFileSync(paths.kubeletConfig, "utf8"));
    expect(kubelet).toMatchObject({
      kind: "KubeletConfiguration",
      address: "127.0.0.11",
      cpuManagerPolicy: "static",
      reservedSystemCPUs: "0",
      topologyManagerPolicy: "best-effort",
      clusterDNS: ["10.21.0.10"],
    });
    await expect(prepareConfig.status(ctx("status"))).resolves.toBeUndefined();
    writeFileSync(paths.kubeletConfig, "{}");
    await expect(prepareConfig.status(ctx("status"))).rejects.toThrow(/kubelet-config.json differs/);
  });

  it("checks CPU policy against this host", () => {
    const base = setup().config;
    const withCpu = (cluster: Partial<NodeConfig["cluster"]>) => ({
      ...base,
      cluster: { ...base.cluster, ...cluster },
    });
    expect(() => cpuSettings(withCpu({ cpuManagerPolicy: "static" }), 4)).toThrow(/static needs reservedCPUs/);
    expect(() => cpuSettings(withCpu({ reservedCPUs: "0-7" }), 4)).toThrow(
      /names CPU 4, 5, 6, 7, but this host has 4 CPU/,
    );
    expect(() => cpuSettings(withCpu({ reservedCPUs: "0-3" }), 4)).toThrow(/reserves every CPU/);
    expect(() => cpuSettings(withCpu({ reservedCPUs: "1-x" }), 4)).toThrow(/not a CPU number or range/);
    expect(cpuSettings(withCpu({ cpuManagerPolicy: "static", reservedCPUs: "0,2" }), 4)).toEqual({
      cpuManagerPolicy: "static",
      topologyManagerPolicy: "none",
      reservedSystemCPUs: "0,2",
    });
  });

  it("puts private registries and live restore into the runtime config, and repo files beside it", async () => {
    const { ctx, config, paths } = setup({
      cluster: {
        quayPrivateRegistry: "https://quay.mirror.local/",
        k8sPrivateRegistry: "k8s.mirror.local",
        dockerLiveRestoreEnabled: true,
        dockerUbuntuPackageRepoUrl: "https://apt.mirror.local/docker",
        containerRuntime: "docker",
      },
    });
    const toml = renderContainerdConfig(config, paths);
    expect(toml).toContain(
      '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."quay.io"]\n  endpoint = ["https://quay.mirror.local"]',
    );
    expect(toml).toContain('mirrors."registry.k8s.io"]\n  endpoint = ["https://k8s.mirror.local"]');
    expect(toml).toContain('sandbox_image = "k8s.mirror.local/pause:3.9"');
    expect(toml).not.toContain('"docker.io"');
    await configureRuntime.start(ctx());
    expect(JSON.parse(readFileSync(paths.dockerDaemonJson, "utf8"))["live-restore"]).toBe(true);
    expect(readFileSync(paths.aptDockerList, "utf8")).toContain("deb https://apt.mirror.local/docker stable main");
    expect(existsSync(paths.yumDockerRepo)).toBe(false);
    await expect(configureRuntime.status(ctx("status"))).resolves.toBeUndefined();
  });

  it("writes the CNI configuration of each plugin with the CIDR and MTU, and none for noop", async () => {
    const flannel = setup({ cluster: { networkPlugin: "flannel", containersCidr: "10.50.0.0/16", mtuSize: "1450" } });
    const files = cniFiles(flannel.config, flannel.paths);
    expect(files.map((f) => f.path.split("/").slice(-2).join("/"))).toEqual([
      "net.d/10-keelson-flannel.conflist",
      "kube-flannel/net-conf.json",
    ]);
    expect(JSON.parse(files[0]!.content).plugins[0].delegate.mtu).toBe(1450);
    expect(JSON.parse(files[1]!.content).Network).toBe("10.50.0.0/16");
    await configureCni.start(flannel.ctx());

    // Switching the plugin removes the other plugin's conflist.
    const weave = { ...flannel.config, cluster: { ...flannel.config.cluster, networkPlugin: "weave" as const } };
    const weaveFiles = cniFiles(weave, flannel.paths);
    expect(weaveFiles[1]!.content).toContain('IPALLOC_RANGE="10.50.0.0/16"');

    const noop = setup({ cluster: { networkPlugin: "noop" } });
    expect(cniFiles(noop.config, noop.paths)).toEqual([]);
    expect(await configureCni.start(noop.ctx())).toEqual({
      message: "networkPlugin noop: no CNI configuration written",
    });
    await expect(configureCni.status(noop.ctx("status"))).resolves.toEqual({ message: expect.stringMatching(/noop/) });
  });

  it("refuses overlapping ranges, a bad MTU and a primary IP this host does not have", async () => {
    const overlap = setup({ cluster: { containersCidr: "10.0.0.0/8", servicesCidr: "10.21.0.0/16" } });
    await expect(networkConfig.start(overlap.ctx())).rejects.toThrow(
      /containersCidr 10.0.0.0\/8 and servicesCidr 10.21.0.0\/16 overlap/,
    );
    const mtu = setup({ cluster: { mtuSize: "100" } });
    await expect(networkConfig.start(mtu.ctx())).rejects.toThrow(/mtuSize "100" must be an integer from 576 to 9216/);
    const foreign = setup({ primaryIp: "192.0.2.77" });
    await expect(networkConfig.start(foreign.ctx())).rejects.toThrow(/192.0.2.77 is not an address of this host/);
    const inside = setup({ primaryIp: "127.0.0.11", cluster: { containersCidr: "127.0.0.0/16" } });
    await expect(networkConfig.start(inside.ctx())).rejects.toThrow(/lies inside 127.0.0.0\/16/);
  });
});

describe("certificates", () => {
  it("asks for the apiserver SANs clients use, and etcd certificates only on masters", () => {
    const { config } = setup({
      cluster: { servicesCidr: "10.96.0.0/12", masterVipIpv4: "10.0.0.100", externalDnsName: "api.example.com" },
    });
    const api = certRequests(config).find((r) => r.profile === "apiserver")!;
    expect(api.ips).toEqual(["127.0.0.11", "127.0.0.1", "10.96.0.1", "10.0.0.100"]);
    expect(api.dns).toEqual(
      expect.arrayContaining(["kubernetes.default.svc.cluster.local", "api.example.com", "host-11"]),
    );
    expect(certRequests(config).map((r) => r.profile)).toEqual(MASTER_CERT_PROFILES);
    expect(certRequests(config).find((r) => r.profile === "kube-scheduler")).toMatchObject({
      commonName: "system:kube-scheduler",
      ips: ["127.0.0.11", "127.0.0.1"],
    });
    const worker = setup({ role: "worker" }).config;
    expect(certRequests(worker).map((r) => r.profile)).toEqual(["kubelet", "kube-proxy"]);
    expect(certRequests(worker)[0]).toMatchObject({ commonName: "system:node:host-11", organization: "system:nodes" });
  });
});

describe("Kubernetes API phases", () => {
  it("a master labels and taints its Node with its control-plane identity, keeping other taints", async () => {
    const { ctx, kube, config } = setup();
    kube.nodes.get(config.nodeName)!.spec = { taints: [{ key: "user/dedicated", value: "gpu", effect: "NoSchedule" }] };
    await nodeTaints.start(ctx());
    const node = kube.nodes.get(config.nodeName)!;
    expect(node.metadata.labels).toMatchObject({
      "node-role.kubernetes.io/master": "",
      "node-role.kubernetes.io/control-plane": "",
      "keelson.io/role": "master",
    });
    expect(node.spec?.taints?.map((t) => t.key)).toEqual([
      "user/dedicated",
      "node-role.kubernetes.io/master",
      "node-role.kubernetes.io/control-plane",
    ]);
    // Never as its kubelet: NodeRestriction refuses a kubelet role labels and taint changes.
    expect(kube.writes).toEqual([`master patch ${config.nodeName}`]);
    await expect(nodeTaints.status(ctx("status"))).resolves.toBeUndefined();

    const open = setup({ cluster: { allowWorkloadsOnMaster: 1 } });
    await nodeTaints.start(open.ctx());
    expect(open.kube.nodes.get(open.config.nodeName)!.spec?.taints).toEqual([]);
  });

  it("a worker's role label comes from a master's pass; its kubelet sets only the keelson.io labels", async () => {
    const master = setup();
    await nodeTaints.start(master.ctx());
    const worker = setup({ role: "worker", primaryIp: "127.0.0.12", sharedKube: master.kube });
    const name = worker.config.nodeName;
    const started = nodeTaints.start(worker.ctx());
    await vi.waitFor(() =>
      expect(master.kube.nodes.get(name)!.metadata.labels).toHaveProperty(["keelson.io/role"], "worker"),
    );
    expect(await nodeTaints.status(master.ctx("status"))).toEqual({ message: `labelled worker(s) ${name}` });
    await expect(started).resolves.toEqual({ message: "labelled worker by a master; no role taint" });
    expect(master.kube.nodes.get(name)!.metadata.labels).toHaveProperty([WORKER_LABEL], "");
    expect(master.kube.writes).toEqual([
      `master patch ${master.config.nodeName}`,
      `kubelet patch ${name}`,
      `master patch ${name}`,
    ]);
    // A role taint put on a worker by hand: the worker reports it, the next master pass removes it.
    master.kube.nodes.get(name)!.spec!.taints = [{ key: "node-role.kubernetes.io/master", effect: "NoSchedule" }];
    await expect(nodeTaints.status(worker.ctx("status"))).rejects.toThrow(/should not be there/);
    await nodeTaints.status(master.ctx("status"));
    expect(master.kube.nodes.get(name)!.spec?.taints).toEqual([]);
    await expect(nodeTaints.status(worker.ctx("status"))).resolves.toBeUndefined();
  });

  it("on detach a master deletes its own Node; a worker marks its own, which a master's sweep deletes", async () => {
    const master = setup({ primaryIp: "127.0.0.14" });
    await nodeTaints.start(master.ctx());
    const worker = setup({ role: "worker", primaryIp: "127.0.0.15", sharedKube: master.kube });
    const name = worker.config.nodeName;
    const other = setup({ role: "worker", primaryIp: "127.0.0.16", sharedKube: master.kube });
    for (const w of [worker, other]) {
      master.kube.nodes.get(w.config.nodeName)!.metadata.labels = kubeletNodeLabels(w.ctx());
    }
    master.kube.writes = [];
    expect(await kubelet.stop(worker.ctx("detach"))).toEqual({
      message: `node ${name} marked ${DETACHED_LABEL}=true: a master of the cluster deletes it (a kubelet may not)`,
    });
    expect(master.kube.writes).toEqual([`kubelet patch ${name}`]);
    // The next master pass deletes the marked Node (and labels the worker that stays).
    expect(await nodeTaints.status(master.ctx("status"))).toEqual({
      message: `labelled worker(s) ${other.config.nodeName}; removed detached node(s) ${name}`,
    });
    expect(master.kube.nodes.has(name)).toBe(false);
    expect(await kubelet.stop(master.ctx("detach"))).toEqual({
      message: `node ${master.config.nodeName} removed from the cluster`,
    });
    expect([...master.kube.nodes.keys()]).toEqual([other.config.nodeName]);
    expect(master.kube.writes.filter((w) => w.includes("delete"))).toEqual([
      `master delete ${name}`,
      `master delete ${master.config.nodeName}`,
    ]);
  });

  it("a worker's mark is cleared before its kubelet starts again, so no sweep deletes a member's Node", async () => {
    const master = setup({ primaryIp: "127.0.0.17" });
    const worker = setup({ role: "worker", primaryIp: "127.0.0.18", sharedKube: master.kube });
    const name = worker.config.nodeName;
    master.kube.nodes.get(name)!.metadata.labels = { ...kubeletNodeLabels(worker.ctx()), [DETACHED_LABEL]: "true" };
    await clearDetachedMark(worker.ctx());
    expect(master.kube.nodes.get(name)!.metadata.labels).not.toHaveProperty([DETACHED_LABEL]);
    expect(await sweepNodes(master.ctx("status"))).toEqual({ labelled: [name], removed: [] });
    // A worker whose API is not up yet has nothing to clear, and says nothing.
    await expect(clearDetachedMark({ ...worker.ctx(), kubeApi: unreachable(master.kube) })).resolves.toBeUndefined();
  });

  it("a worker that cannot reach the API to mark its Node says the Node stays and how to remove it", async () => {
    const worker = setup({ role: "worker", primaryIp: "127.0.0.19" });
    expect(await kubelet.stop({ ...worker.ctx("detach"), kubeApi: unreachable(worker.kube) })).toEqual({
      message: `node ${worker.config.nodeName} stays registered: it could not be marked for a master to delete (ECONNREFUSED); remove it with kubectl delete node ${worker.config.nodeName}`,
    });
  });

  it("a worker without a master to label it fails naming what it waited for", async () => {
    const worker = setup({ role: "worker", primaryIp: "127.0.0.13", timeouts: { waitForServicesMs: 300 } });
    await expect(nodeTaints.start(worker.ctx())).rejects.toThrow(
      `waited 300 ms for a master to label node ${worker.config.nodeName} (a kubelet may not set its own role or taints): label ${WORKER_LABEL}= missing`,
    );
  });

  it("drains by cordoning and evicting (not DaemonSet pods), and uncordons only its own cordon", async () => {
    const { ctx, kube, config, paths } = setup();
    kube.pods = [
      { namespace: "default", name: "web-1", node: config.nodeName },
      { namespace: "kube-system", name: "proxy-x", ownerKind: "DaemonSet", node: config.nodeName },
      { namespace: "default", name: "elsewhere", node: "other" },
    ];
    expect(await drainPods.stop(ctx("stop"))).toEqual({ message: "cordoned; evicted 1 pod(s)" });
    expect(kube.evicted).toEqual(["default/web-1"]);
    expect(kube.nodes.get(config.nodeName)!.spec?.unschedulable).toBe(true);
    expect(existsSync(paths.cordonMarker)).toBe(true);
    await expect(uncordon.status(ctx("status"))).rejects.toThrow(/still cordoned by Keelson/);
    expect(await uncordon.start(ctx())).toEqual({ message: "uncordoned (Keelson had cordoned it)" });
    expect(kube.nodes.get(config.nodeName)!.spec?.unschedulable).toBe(false);

    // The user cordons the node: a drain leaves no marker, and start leaves the cordon alone.
    kube.nodes.get(config.nodeName)!.spec!.unschedulable = true;
    await drainPods.stop(ctx("stop"));
    expect(existsSync(paths.cordonMarker)).toBe(false);
    expect((await uncordon.start(ctx()))?.message).toMatch(/left cordoned: the cordon was not made by Keelson/);
    expect(kube.nodes.get(config.nodeName)!.spec?.unschedulable).toBe(true);
    await expect(uncordon.status(ctx("status"))).resolves.toEqual({ message: "cordoned by a user: left as is" });
  });

  it("fails taints with a clear error when the node never registered", async () => {
    const { ctx, kube, config } = setup();
    kube.nodes.delete(config.nodeName);
    await expect(nodeTaints.start(ctx())).rejects.toThrow(
      `node ${config.nodeName} is not registered with https://fake-apiserver`,
    );
    expect(await drainPods.stop(ctx("stop"))).toEqual({ message: "node not registered: nothing to drain" });
  });
});

describe("master extras", () => {
  it("reports the app catalog as deprecated and keepalived as not needed without a VIP", async () => {
    const { ctx } = setup();
    expect((await appCatalog.start(ctx()))?.message).toMatch(/deprecated/);
    expect(await keepalived.start(ctx())).toEqual({ message: "masterVipIpv4 is not set: keepalived is not needed" });
    expect(await keepalived.status(ctx("status"))).toEqual({
      message: "masterVipIpv4 is not set: keepalived is not needed",
    });
  });

  it("writes the VRRP instance and fails naming the keepalived binary and where it looked", async () => {
    const { ctx, paths, config } = setup({
      cluster: { masterVipIpv4: "10.0.0.100", masterVipIface: "eth1", masterVipVrouterId: "77" },
      // A node package without keepalived (the fixture's runs the real one: keepalived.test.ts).
      nodePackage: tempDir("nopkg"),
      systemBinDirs: ["/nonexistent/sbin"],
    });
    const error = await keepalived.start(ctx()).catch((e: Error) => e.message);
    expect(error).toBe(
      `required binary "keepalived" not found; looked for ${config.nodePackage}/bin/keepalived, /nonexistent/sbin/keepalived`,
    );
    // The configuration is written before the binary is looked for, so the operator can read it.
    const conf = readFileSync(paths.keepalivedConf, "utf8");
    expect(conf).toContain("interface eth1");
    // API id 77 is VRRP id 78 (vrrpRouterId: the API counts from 0, VRRP from 1).
    expect(conf).toContain("virtual_router_id 78");
    expect(conf).toContain("10.0.0.100/32 dev eth1");
    await expect(keepalived.status(ctx("status"))).rejects.toThrow(/keepalived is not installed/);
  });

  it("validates the VIP settings", async () => {
    const noIface = setup({ cluster: { masterVipIpv4: "10.0.0.100", masterVipVrouterId: "1" } });
    await expect(keepalived.start(noIface.ctx())).rejects.toThrow(/masterVipIface is not/);
    const badId = setup({
      cluster: { masterVipIpv4: "10.0.0.100", masterVipIface: "eth0", masterVipVrouterId: "300" },
    });
    await expect(keepalived.start(badId.ctx())).rejects.toThrow(
      /masterVipVrouterId "300" must be an integer from 0 to 254/,
    );
  });
});

describe("etcd helpers", () => {
  it("parses etcdctl member list output, including an unstarted member", () => {
    const members = parseMemberList(
      "8e9e05c52164694d, started, node-a, https://10.0.0.1:2380, https://10.0.0.1:2379, false\n" +
        "a8266ecf031671f3, unstarted, , https://10.0.0.2:2380, , false\n",
    );
    expect(members).toEqual([
      {
        id: "8e9e05c52164694d",
        status: "started",
        name: "node-a",
        peerUrls: ["https://10.0.0.1:2380"],
        clientUrls: ["https://10.0.0.1:2379"],
      },
      { id: "a8266ecf031671f3", status: "unstarted", name: "", peerUrls: ["https://10.0.0.2:2380"], clientUrls: [] },
    ]);
  });
});
