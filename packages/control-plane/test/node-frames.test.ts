import { createPrivateKey, X509Certificate } from "node:crypto";
import type { AddressInfo } from "node:net";
import { clusters, externalClusters, firstRow, nodes } from "@keelson/db";
import {
  AGENT_CAPABILITIES,
  AGENT_LINK_PATH,
  type AgentFrame,
  type CertProfile,
  type CertSignedFrame,
  CONTROL_CAPABILITIES,
  type ControlFrame,
  type NodePhaseReport,
  PROTOCOL_VERSION,
  parseControlFrame,
} from "@keelson/protocol";
import * as x509 from "@peculiar/x509";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { parse as parseYaml } from "yaml";
import type { NodeEvent } from "../src/agents/node-events.ts";
import { decideCertificate, firstServiceIp } from "../src/domain/hosts/cert-policy.ts";
import { generateKeyPair, webCrypto } from "../src/pki/keys.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { fillStore, freeStore } from "./storage-fill.ts";

/**
 * The node frames of the agent link (issue 4) against the real hub over a real WebSocket:
 * node.report storage and events, cert.sign with the cluster CA and its policy, and
 * cluster-token.verify. Hosts are put into clusters directly in the table here; the attach
 * operation that normally does it is tested in attach.test.ts.
 */

interface Peer {
  hostId: string;
  send(frame: AgentFrame): void;
  next<T extends ControlFrame["type"]>(type: T, id?: string): Promise<Extract<ControlFrame, { type: T }>>;
  close(): void;
}

let t: TestApp;
let url: string;
beforeAll(async () => {
  t = await createTestApp({ runOperations: false, agentHub: { presence: { flushDelayMs: 5 } } });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}${AGENT_LINK_PATH}`;
});
afterAll(() => t.close());

async function connectHost(
  hostname: string,
  primaryIp: string,
  capabilities?: string[],
): Promise<Peer & { welcome: ControlFrame }> {
  const joinToken = (
    await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {}, token: ADMIN_TOKEN })
  ).json().token as string;
  const reg = (
    await t.request({ method: "POST", url: "/v1/agents/register", payload: { joinToken, hostname }, token: null })
  ).json() as { hostId: string; credential: string };
  const ws = new WebSocket(url, {
    headers: { authorization: `Bearer ${reg.credential}`, "x-keelson-host-id": reg.hostId },
  });
  const frames: ControlFrame[] = [];
  const waiters: { match: (f: ControlFrame) => boolean; resolve: (f: ControlFrame) => void }[] = [];
  ws.on("message", (data) => {
    const parsed = parseControlFrame(data as Buffer);
    if (!parsed.ok) throw new Error(parsed.error.message);
    const waiter = waiters.find((w) => w.match(parsed.frame));
    if (waiter) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(parsed.frame);
    } else frames.push(parsed.frame);
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const peer: Peer = {
    hostId: reg.hostId,
    send: (frame) => ws.send(JSON.stringify(frame)),
    next: (type, id) => {
      const match = (f: ControlFrame) => f.type === type && (id === undefined || ("id" in f && f.id === id));
      const queued = frames.findIndex(match);
      if (queued >= 0) return Promise.resolve(frames.splice(queued, 1)[0] as never);
      return new Promise((resolve) => waiters.push({ match, resolve: resolve as (f: ControlFrame) => void }));
    },
    close: () => ws.close(),
  };
  peer.send({
    type: "hello",
    protocolVersion: PROTOCOL_VERSION,
    hostId: reg.hostId,
    agentVersion: "0.1.0",
    hostname,
    primaryIp,
    facts: {
      hostname,
      os: { platform: "linux", family: "debian", distro: "Debian", release: "12", kernel: "6.1.0" },
      arch: "x64",
      cpu: { model: "cpu", count: 2 },
      memory: { totalBytes: 2 ** 32 },
      disks: [],
      interfaces: [{ name: "eth0", mac: "02:00:00:00:00:09", addresses: [primaryIp] }],
      primaryIp,
      agentVersion: "0.1.0",
    },
    agentStatus: "running",
    ...(capabilities ? { capabilities } : {}),
  });
  const welcome = await peer.next("welcome");
  await t.app.keelson.agents.flushPresence();
  return { ...peer, welcome };
}

async function createCluster(name: string, body: Record<string, unknown> = {}): Promise<string> {
  const res = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name, ...body } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().uuid as string;
}

async function putInCluster(hostId: string, clusterId: string, isMaster: 0 | 1): Promise<void> {
  await t.db.update(nodes).set({ clusterId, isMaster, status: "converging" }).where(eq(nodes.id, hostId));
}

const nodeRow = async (hostId: string) => firstRow(await t.db.select().from(nodes).where(eq(nodes.id, hostId)));

function report(status: NodePhaseReport["status"], state: "running" | "failed" = "running"): NodePhaseReport {
  return {
    status,
    phases: [
      {
        id: "gen-certs",
        name: "Generate certificates / send signing request",
        order: 1,
        state,
        lastError: state === "failed" ? "openssl missing" : null,
        startedAt: null,
        finishedAt: null,
        durationMs: null,
      },
    ],
  };
}

describe("node.report", () => {
  it("is stored once the store has room again when it came while the storage was full, not lost", async () => {
    const peer = await connectHost("rep-full", "10.7.0.9");
    const clusterId = await createCluster("reports-full");
    await putInCluster(peer.hostId, clusterId, 1);
    const events: NodeEvent[] = [];
    const off = t.app.keelson.agents.nodeEvents.on(peer.hostId, (e) => events.push(e));
    // Big enough to need new pages: every phase failed with a long error.
    const big: NodePhaseReport = {
      status: "failed",
      phases: Array.from({ length: 21 }, (_, i) => ({
        ...(report("failed", "failed").phases[0] as NodePhaseReport["phases"][number]),
        order: i + 1,
        lastError: `${i}: ${"no such file ".repeat(150)}`,
      })),
    };
    await fillStore(t, ["nodes"]);
    try {
      peer.send({ type: "node.report", clusterId, report: big, apiResponding: false });
      // Refused at least once (the first retry comes after 250 ms): not stored, not announced.
      await new Promise((r) => setTimeout(r, 600));
      expect(events).toEqual([]);
      expect((await nodeRow(peer.hostId))?.status).toBe("converging");
    } finally {
      await freeStore(t, ["nodes"]);
    }
    try {
      await waitFor(() => events.length === 1, 10_000);
      expect(await nodeRow(peer.hostId)).toMatchObject({ status: "failed", phases: big.phases });
    } finally {
      off();
      peer.close();
    }
  });

  it("is stored and announced only for the cluster the control plane has the node in", async () => {
    const peer = await connectHost("rep-1", "10.7.0.1");
    const clusterId = await createCluster("reports");
    const events: NodeEvent[] = [];
    const off = t.app.keelson.agents.nodeEvents.on(peer.hostId, (e) => events.push(e));
    try {
      // Unattached: a report of no cluster is the node's own state.
      peer.send({ type: "node.report", clusterId: null, report: { status: "ok", phases: [] }, apiResponding: false });
      await waitFor(() => events.length === 1);

      await putInCluster(peer.hostId, clusterId, 1);
      // A report still of no cluster (the agent has not had its join yet): ignored.
      peer.send({ type: "node.report", clusterId: null, report: report("ok"), apiResponding: true });
      // A report of the right cluster: stored, with the phases and api_responding.
      peer.send({ type: "node.report", clusterId, report: report("failed", "failed"), apiResponding: true });
      await waitFor(() => events.length === 2);
      expect(await nodeRow(peer.hostId)).toMatchObject({ status: "failed", apiResponding: 1, clusterId });
      expect((await nodeRow(peer.hostId))?.phases).toEqual(report("failed", "failed").phases);
      expect(events[1]).toMatchObject({ type: "node-report", clusterId, report: { status: "failed" } });

      // Another cluster: ignored.
      peer.send({ type: "node.report", clusterId: "some-other-cluster", report: report("ok"), apiResponding: true });
      peer.send({ type: "node.report", clusterId, report: report("ok"), apiResponding: false });
      await waitFor(() => events.length === 3);
      expect(await nodeRow(peer.hostId)).toMatchObject({ status: "ok", apiResponding: 0 });
      expect(events.map((e) => e.type)).toEqual(["node-report", "node-report", "node-report"]);
    } finally {
      off();
      peer.close();
    }
    await waitFor(() => t.app.keelson.agents.nodeEvents.listenerCount(peer.hostId) === 0);
  });

  it("keeps the node's status across a reconnect (the link does not reset it to ok)", async () => {
    const peer = await connectHost("rep-2", "10.7.0.2");
    const clusterId = await createCluster("reports-2");
    await putInCluster(peer.hostId, clusterId, 0);
    peer.close();
    await waitFor(() => !t.app.keelson.agents.isConnected(peer.hostId));
    await t.app.keelson.agents.flushPresence();
    expect((await nodeRow(peer.hostId))?.status).toBe("converging");
  });
});

async function csr(commonName: string, sans: x509.JsonGeneralNames = []): Promise<string> {
  const keys = await generateKeyPair();
  const request = await x509.Pkcs10CertificateRequestGenerator.create(
    {
      name: [{ CN: [commonName] }, { O: ["system:masters"] }],
      keys,
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
      ...(sans.length > 0 ? { extensions: [new x509.SubjectAlternativeNameExtension(sans)] } : {}),
    },
    webCrypto,
  );
  return request.toString("pem");
}

describe("cluster.report", () => {
  it("is offered only to an agent that declares it, and ignored from a host that is no external cluster's agent", async () => {
    const plain = await connectHost("plain-host", "10.0.9.1");
    expect(plain.welcome).not.toHaveProperty("capabilities");
    plain.close();
    const agent = await connectHost("in-cluster-host", "10.0.9.2", [AGENT_CAPABILITIES.clusterReport]);
    expect(agent.welcome).toMatchObject({ capabilities: [CONTROL_CAPABILITIES.clusterReport] });
    const before = await t.db.select().from(externalClusters);
    agent.send({
      type: "cluster.report",
      kubernetesVersion: "v1.31.4",
      nodes: [],
      healthy: true,
      at: new Date().toISOString(),
    });
    // Answered in order on the link: a token.verify after it proves the report was handled, the link kept.
    agent.send({ type: "token.verify", id: "after-report", token: ADMIN_TOKEN });
    expect((await agent.next("token.verified", "after-report")).valid).toBe(true);
    expect(await t.db.select().from(externalClusters)).toEqual(before);
    agent.close();
  });
});

describe("cert.sign", () => {
  let worker: Peer;
  let master: Peer;
  let loose: Peer;
  let clusterId: string;
  let caPem: string;
  let n = 0;

  beforeAll(async () => {
    worker = await connectHost("worker-a", "10.8.0.2");
    master = await connectHost("master-a", "10.8.0.1");
    loose = await connectHost("loose-a", "10.8.0.3");
    clusterId = await createCluster("certs", {
      masterVipIpv4: "10.8.0.100",
      masterVipIface: "eth0",
      externalDnsName: "api.certs.example",
      servicesCidr: "10.96.0.0/12",
      containersCidr: "10.244.0.0/16",
    });
    await putInCluster(worker.hostId, clusterId, 0);
    await putInCluster(master.hostId, clusterId, 1);
    caPem = firstRow(await t.db.select().from(clusters).where(eq(clusters.id, clusterId)))?.caCertPem as string;
  });
  afterAll(() => {
    for (const p of [worker, master, loose]) p.close();
  });

  async function sign(
    peer: Peer,
    profile: CertProfile,
    csrPem: string,
    names: { dnsNames?: string[]; ipAddresses?: string[] } = {},
  ): Promise<CertSignedFrame> {
    const id = `sign-${++n}`;
    peer.send({
      type: "cert.sign",
      id,
      profile,
      csrPem,
      dnsNames: names.dnsNames ?? [],
      ipAddresses: names.ipAddresses ?? [],
    });
    return peer.next("cert.signed", id);
  }

  it("signs a worker's kubelet certificate with the cluster CA: profile usages, fixed groups, its own names", async () => {
    const answer = await sign(
      worker,
      "kubelet",
      await csr("system:node:worker-a", [{ type: "dns", value: "worker-a" }]),
      {
        ipAddresses: ["10.8.0.2"],
      },
    );
    expect(answer.ok, JSON.stringify(answer)).toBe(true);
    if (!answer.ok) return;
    expect(answer.caCertPem).toBe(caPem);
    const cert = new X509Certificate(answer.certPem);
    expect(cert.verify(new X509Certificate(caPem).publicKey)).toBe(true);
    // O comes from the profile, not from the CSR (which asked for system:masters).
    expect(cert.subject.split("\n")).toEqual(["CN=system:node:worker-a", "O=system:nodes"]);
    expect(cert.subjectAltName?.split(", ").sort()).toEqual(["DNS:worker-a", "IP Address:10.8.0.2"]);
    const parsed = new x509.X509Certificate(answer.certPem);
    const eku = parsed.getExtension(x509.ExtendedKeyUsageExtension);
    expect(eku?.usages.sort()).toEqual([x509.ExtendedKeyUsage.clientAuth, x509.ExtendedKeyUsage.serverAuth].sort());
    expect(Date.parse(cert.validTo) - Date.now()).toBeGreaterThan(300 * 24 * 3_600_000);
  });

  it("signs a master's API server certificate with the cluster's API names", async () => {
    const answer = await sign(master, "apiserver", await csr("kube-apiserver"), {
      dnsNames: ["kubernetes", "kubernetes.default.svc.cluster.local", "api.certs.example", "localhost", "master-a"],
      ipAddresses: ["10.8.0.1", "127.0.0.1", "10.8.0.100", "10.96.0.1"],
    });
    expect(answer.ok, JSON.stringify(answer)).toBe(true);
    if (!answer.ok) return;
    const cert = new X509Certificate(answer.certPem);
    for (const name of ["DNS:api.certs.example", "IP Address:10.8.0.100", "IP Address:10.96.0.1", "DNS:kubernetes"]) {
      expect(cert.subjectAltName).toContain(name);
    }
    const eku = new x509.X509Certificate(answer.certPem).getExtension(x509.ExtendedKeyUsageExtension);
    expect(eku?.usages).toEqual([x509.ExtendedKeyUsage.serverAuth]);
    // The cluster's service-account signing key comes with it, the same at every asking.
    expect(createPrivateKey(answer.serviceAccountKeyPem ?? "").asymmetricKeyType).toBe("ec");
    const again = await sign(master, "apiserver", await csr("kube-apiserver"));
    expect(again.ok && again.serviceAccountKeyPem).toBe(answer.serviceAccountKeyPem);
  });

  it("signs the controllers' identities, and sends the certificates API's signing CA with the controller-manager's", async () => {
    const answer = await sign(master, "kube-controller-manager", await csr("system:kube-controller-manager"), {
      dnsNames: ["localhost"],
      ipAddresses: ["10.8.0.1", "127.0.0.1"],
    });
    expect(answer.ok, JSON.stringify(answer)).toBe(true);
    if (!answer.ok) return;
    expect(new X509Certificate(answer.certPem).subject).toBe("CN=system:kube-controller-manager");
    const signing = answer.clusterSigning;
    if (!signing) throw new Error("no clusterSigning in the answer");
    const intermediate = new X509Certificate(signing.certPem);
    // An intermediate of the cluster CA that can sign leaves but no further CA; its key is not the CA's.
    expect(intermediate.ca).toBe(true);
    expect(intermediate.verify(new X509Certificate(caPem).publicKey)).toBe(true);
    expect(intermediate.checkPrivateKey(createPrivateKey(signing.keyPem))).toBe(true);
    const basic = new x509.X509Certificate(signing.certPem).getExtension(x509.BasicConstraintsExtension);
    expect(basic?.pathLength).toBe(0);
    expect(new X509Certificate(caPem).checkPrivateKey(createPrivateKey(signing.keyPem))).toBe(false);
    // Every master gets the same signing key.
    const again = await sign(master, "kube-controller-manager", await csr("system:kube-controller-manager"));
    expect(again.ok && again.clusterSigning?.keyPem).toBe(signing.keyPem);
    // The scheduler's answer carries neither key; a worker may have neither identity.
    const scheduler = await sign(master, "kube-scheduler", await csr("system:kube-scheduler"));
    expect(scheduler.ok && scheduler.clusterSigning).toBeUndefined();
    expect(scheduler.ok && scheduler.serviceAccountKeyPem).toBeUndefined();
    expect((await sign(worker, "kube-scheduler", await csr("system:kube-scheduler"))).ok).toBe(false);
  });

  it("sends the service-account key with the apiserver certificate only", async () => {
    const answer = await sign(worker, "kube-proxy", await csr("system:kube-proxy"));
    expect(answer.ok, JSON.stringify(answer)).toBe(true);
    expect(answer.ok && answer.serviceAccountKeyPem).toBeUndefined();
  });

  it("refuses what is not the node's: other names, other subjects, master profiles on workers, no cluster", async () => {
    const refusals: [
      Peer,
      Parameters<typeof sign>[1],
      string,
      { dnsNames?: string[]; ipAddresses?: string[] },
      RegExp,
    ][] = [
      [worker, "kubelet", "system:node:worker-a", { ipAddresses: ["10.8.0.1"] }, /IP:10\.8\.0\.1 is not this node's/],
      [
        worker,
        "kubelet",
        "system:node:worker-a",
        { dnsNames: ["evil.example"] },
        /DNS:evil\.example is not this node's/,
      ],
      [worker, "kubelet", "system:node:master-a", {}, /common name "system:node:master-a" is not allowed/],
      [worker, "kube-proxy", "system:kube-proxy", { ipAddresses: ["10.8.0.100"] }, /IP:10\.8\.0\.100/],
      [worker, "apiserver", "kube-apiserver", {}, /for masters only/],
      [worker, "etcd-client", "kube-apiserver-etcd-client", {}, /for masters only/],
      [master, "kubelet", "system:node:master-a", { dnsNames: ["api.certs.example"] }, /not this node's/],
      [loose, "kubelet", "system:node:loose-a", {}, /not attached to a cluster/],
    ];
    for (const [peer, profile, cn, names, message] of refusals) {
      const answer = await sign(peer, profile, await csr(cn), names);
      expect(answer.ok, `${profile} ${cn} ${JSON.stringify(names)}`).toBe(false);
      if (!answer.ok) {
        expect(answer.error.code).toBe("REFUSED");
        expect(answer.error.message).toMatch(message);
      }
    }
    // A SAN hidden in the CSR counts like one in the frame.
    const hidden = await sign(
      worker,
      "kubelet",
      await csr("system:node:worker-a", [{ type: "ip", value: "10.9.9.9" }]),
    );
    expect(hidden.ok).toBe(false);
    const garbage = await sign(worker, "kubelet", "not a csr");
    expect(garbage).toMatchObject({ ok: false, error: { code: "REFUSED", message: expect.stringMatching(/PKCS#10/) } });
  });

  it("decides by the documented policy (unit)", () => {
    const node = { hostId: "h", name: "node-1", primaryIp: "10.0.0.5", isMaster: true };
    const cluster = { spec: {} };
    expect(firstServiceIp("10.21.0.0/16")).toBe("10.21.0.1");
    expect(firstServiceIp("10.96.0.0/12")).toBe("10.96.0.1");
    // No servicesCidr in the spec: the agent's default range, 10.21.0.0/16.
    const api = decideCertificate(node, cluster, {
      profile: "apiserver",
      commonName: "kube-apiserver",
      dnsNames: ["kubernetes.default.svc"],
      ipAddresses: ["10.21.0.1", "10.0.0.5"],
    });
    expect(api).toMatchObject({ ok: true, usages: ["server"] });
    // Node names by IP are allowed as the kubelet CN too (clusters that do not use host names).
    expect(
      decideCertificate(node, cluster, {
        profile: "kubelet",
        commonName: "system:node:10.0.0.5",
        dnsNames: [],
        ipAddresses: [],
      }),
    ).toMatchObject({ ok: true, subject: { commonName: "system:node:10.0.0.5", organization: ["system:nodes"] } });
    expect(
      decideCertificate(node, cluster, {
        profile: "etcd-peer",
        commonName: "node-1",
        dnsNames: [],
        ipAddresses: ["10.21.0.1"],
      }),
    ).toMatchObject({ ok: false });
  });
});

describe("cluster-token.verify", () => {
  it("accepts kubeconfig tokens issued for the node's cluster and nothing else", async () => {
    const peer = await connectHost("bouncer-a", "10.9.0.1");
    const loose = await connectHost("bouncer-b", "10.9.0.2");
    const mine = await createCluster("tokens-a", { externalDnsName: "a.example" });
    const theirs = await createCluster("tokens-b", { externalDnsName: "b.example" });
    await putInCluster(peer.hostId, mine, 1);
    const tokenOf = async (clusterId: string) => {
      const res = await t.request({ url: `/v4/${t.projectId}/kubeconfig/${clusterId}` });
      expect(res.statusCode, res.body).toBe(200);
      return (parseYaml(res.body) as { users: { user: { token: string } }[] }).users[0]?.user.token as string;
    };
    const ask = async (p: Peer, token: string, id: string) => {
      p.send({ type: "cluster-token.verify", id, token });
      return (await p.next("cluster-token.verified", id)).subject;
    };
    const good = await tokenOf(mine);
    expect(await ask(peer, good, "v1")).toEqual(expect.any(String));
    expect(await ask(peer, await tokenOf(theirs), "v2")).toBeNull();
    expect(await ask(peer, "kct_not-a-real-token", "v3")).toBeNull();
    expect(await ask(peer, ADMIN_TOKEN, "v4")).toBeNull();
    expect(await ask(loose, good, "v5")).toBeNull();
    peer.close();
    loose.close();
  });
});

async function waitFor(probe: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}
