import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bouncerVerifyUrl, registerBouncerEndpoint } from "../../src/node/bouncer-endpoint.ts";
import { NodeController } from "../../src/node/controller.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { processStartTime } from "../../src/services/process-info.ts";
import { StateDir } from "../../src/state-dir.ts";
import { createTestCa, FIXTURE_NODE_PACKAGE, fakeHost, MASTER_CERT_PROFILES } from "../phases/helpers.ts";
import { FakeLink, joinPayload, tempDir, testLog, waitFor } from "./helpers.ts";

/**
 * A master driven by the node controller with the real phases and processes (real etcd, the
 * stand-ins of test/fixtures/node-package) on 127.0.0.31: certificates signed over the (fake)
 * link with the SANs the phases ask for, bearer tokens checked by the node bouncer through the
 * agent's verify endpoint, apiResponding, and a leave that leaves nothing behind.
 */

const IP = "127.0.0.31";
const TOKEN = "kubeconfig-token-issued-for-cluster-1";
let root: string;
let hostRoot: string;
let link: FakeLink;
let services: DirectSupervisor;
let node: NodeController;
let api: FastifyInstance;
const asked: string[] = [];

beforeAll(async () => {
  root = tempDir("real");
  hostRoot = join(root, "host");
  mkdirSync(hostRoot, { recursive: true });
  const ca = await createTestCa(join(root, "ca"));
  link = new FakeLink();
  link.sign = async (request) => {
    const signed = await ca.signCsr(request.csrPem, request.profile, new AbortController().signal);
    return {
      certPem: signed.certPem,
      caCertPem: signed.caPem,
      ...(signed.serviceAccountKeyPem ? { serviceAccountKeyPem: signed.serviceAccountKeyPem } : {}),
      ...(signed.clusterSigning ? { clusterSigning: signed.clusterSigning } : {}),
    };
  };
  // The agent's local API, reduced to the bouncer's verify endpoint.
  const stateDir = new StateDir(join(root, "state")).ensure();
  api = Fastify();
  const endpoint = registerBouncerEndpoint(api, {
    stateDir,
    verify: async (token) => {
      asked.push(token);
      return token === TOKEN ? "admin@cluster-1" : null;
    },
  });
  await api.listen({ host: "127.0.0.1", port: 0 });
  const verifyUrl = bouncerVerifyUrl(
    { host: "127.0.0.1", port: (api.server.address() as AddressInfo).port },
    endpoint.path,
  );
  services = new DirectSupervisor({ hostRoot, log: testLog(), restartBackoff: { initialMs: 200, maxMs: 1000 } });
  node = new NodeController({
    stateDir: stateDir.root,
    nodePackage: FIXTURE_NODE_PACKAGE,
    hostRoot,
    host: () => ({ hostId: "host-31", hostname: "master-31", primaryIp: IP }),
    link,
    services: async () => services,
    log: testLog(),
    bouncerVerifyUrl: () => verifyUrl,
    reportIntervalMs: 50,
    tuning: {
      hostChecks: fakeHost(root),
      timeouts: { serviceStartMs: 15_000, waitForServicesMs: 15_000, commandMs: 15_000, serviceStopMs: 5_000 },
      reconcile: { checkIntervalMs: 1000, retryIntervalMs: 200, maxRetryIntervalMs: 1000 },
    },
  });
}, 30_000);

afterAll(async () => {
  await node?.close();
  await api?.close();
  services?.close();
  if (root) {
    killAllFromPidFiles(hostRoot);
    rmSync(root, { recursive: true, force: true });
  }
});

function apiGet(path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      `https://${IP}:443${path}`,
      {
        ca: readFileSync(join(hostRoot, "etc", "keelson", "pki", "ca.crt")),
        headers: { authorization: `Bearer ${token}` },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("a master through the node controller, real phases", () => {
  let pids: number[] = [];

  it("joins, signs its certificates over the link, and reports ok with the API responding", async () => {
    const payload = joinPayload({
      role: "master",
      settings: {
        containersCidr: "10.20.0.0/16",
        servicesCidr: "10.21.0.0/16",
        networkPlugin: "flannel",
        etcdHeartbeatIntervalMs: 50,
        etcdElectionTimeoutMs: 500,
      },
      apiEndpoint: `https://${IP}:443`,
    });
    expect(await node.join(payload)).toEqual({ accepted: true });
    await waitFor(
      "ok",
      () => {
        const failed = link.last()?.report.phases.find((p) => p.state === "failed");
        if (failed) throw new Error(`${failed.id} failed: ${failed.lastError}`);
        return link.last()?.report.status === "ok";
      },
      60_000,
    );
    const last = link.last()!;
    expect(last.clusterId).toBe("cluster-1");
    expect(last.apiResponding).toBe(true);
    expect(last.report.phases.filter((p) => p.state === "running")).toHaveLength(20);
    // Every profile was signed over the link, with the SANs the phase put in its CSR.
    expect(new Set(link.signed.map((r) => r.profile))).toEqual(new Set(MASTER_CERT_PROFILES));
    const apiserver = link.signed.find((r) => r.profile === "apiserver")!;
    expect(apiserver.ipAddresses).toEqual(expect.arrayContaining([IP, "127.0.0.1", "10.21.0.1"]));
    expect(apiserver.dnsNames).toContain("kubernetes.default.svc.cluster.local");
    expect(link.signed.find((r) => r.profile === "kubelet")?.ipAddresses).toEqual([IP]);
    pids = Object.values(services.livePids());
    expect(pids).toHaveLength(9);
    expect(node.snapshot()).toMatchObject({ clusterId: "cluster-1", role: "master", nodeStatus: "ok" });
  }, 90_000);

  it("lets the cluster's bearer tokens through the node bouncer, asking the agent, and nothing else", async () => {
    expect(await apiGet("/api/v1/nodes", TOKEN)).toBe(200);
    expect(await apiGet("/api/v1/nodes", "forged-token")).toBe(401);
    expect(asked).toContain(TOKEN);
    expect(asked).toContain("forged-token");
  });

  it("leaves clean: every process gone, the host root emptied of what the phases wrote", async () => {
    expect(await node.leave({ clusterId: "cluster-1", lastNode: true })).toEqual({ clean: true });
    for (const pid of pids) expect(processStartTime(pid)).toBeUndefined();
    for (const dir of [
      ["etc", "keelson"],
      ["etc", "kubernetes"],
      ["etc", "etcd"],
      ["var", "lib", "etcd"],
      ["var", "lib", "containerd"],
      ["etc", "containerd"],
    ]) {
      expect(existsSync(join(hostRoot, ...dir)), dir.join("/")).toBe(false);
    }
    expect(link.last()).toEqual({ clusterId: null, report: { status: "ok", phases: [] }, apiResponding: false });
  }, 60_000);
});
