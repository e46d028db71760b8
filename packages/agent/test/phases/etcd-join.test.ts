import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeConfig } from "../../src/phases/config.ts";
import { buildContext } from "../../src/phases/context.ts";
import { genCerts } from "../../src/phases/impl/certs.ts";
import { configureEtcd, etcdctl, etcdUrls, memberList, startEtcd } from "../../src/phases/impl/etcd.ts";
import { createKubeApi } from "../../src/phases/kube-api.ts";
import { nodePaths } from "../../src/phases/paths.ts";
import type { PhaseContext, PhaseIntent, SignCsr } from "../../src/phases/types.ts";
import { DirectSupervisor, killAllFromPidFiles } from "../../src/services/direct.ts";
import { createTestCa, freePorts, nodeConfig, tempDir, testLog } from "./helpers.ts";

/**
 * Two masters on 127.0.0.11 and 127.0.0.12 form one real etcd cluster through the phases: the
 * first bootstraps, the second is added with `member add` before it starts. Data written
 * through one member is read through the other; the second leaves with detach.
 */

interface Master {
  config: NodeConfig;
  services: DirectSupervisor;
  ctx: (intent: PhaseIntent) => PhaseContext;
}

let root: string;
let signCsr: SignCsr;
const masters: Master[] = [];

async function master(ip: string, etcdPeers: string[]): Promise<Master> {
  const config = nodeConfig({
    hostRoot: join(root, ip),
    primaryIp: ip,
    ports: await freePorts(ip),
    etcdPeers,
    cluster: { etcdHeartbeatIntervalMs: 50, etcdElectionTimeoutMs: 500 },
  });
  const services = new DirectSupervisor({ hostRoot: config.hostRoot, log: testLog() });
  const paths = nodePaths(config.hostRoot);
  const kubeApi = createKubeApi({ url: config.apiServerUrl, caFile: paths.caCert, certFile: "", keyFile: "" });
  const m: Master = {
    config,
    services,
    ctx: (intent) =>
      buildContext(
        { config, paths, log: testLog(), services, signCsr, kubeApi },
        { signal: AbortSignal.timeout(30_000), intent, regenerateCerts: false, log: testLog() },
      ),
  };
  masters.push(m);
  return m;
}

beforeAll(async () => {
  root = tempDir("join");
  signCsr = (await createTestCa(join(root, "ca"))).signCsr;
}, 20_000);

afterAll(() => {
  for (const m of masters) {
    m.services.close();
    killAllFromPidFiles(m.config.hostRoot);
  }
  if (root && !process.env.KEEP) rmSync(root, { recursive: true, force: true });
});

describe("etcd across two masters", () => {
  it("bootstraps on the first master, joins the second with member add, and replicates", async () => {
    const a = await master("127.0.0.11", []);
    for (const phase of [genCerts, configureEtcd, startEtcd]) await phase.start(a.ctx("start"));
    const aUrl = etcdUrls(a.ctx("status")).client;

    const b = await master("127.0.0.12", [aUrl]);
    await genCerts.start(b.ctx("start"));
    const joining = await configureEtcd.start(b.ctx("start"));
    expect(joining?.message).toMatch(/joining etcd cluster of 2 member/);
    // Added before it started: the cluster already lists it, unstarted.
    const before = await memberList(a.ctx("status"), [aUrl]);
    expect(before).toHaveLength(2);
    expect(before.find((m) => m.peerUrls.includes(etcdUrls(b.ctx("status")).peer))?.status).toBe("unstarted");
    await startEtcd.start(b.ctx("start"));
    const bUrl = etcdUrls(b.ctx("status")).client;

    const after = await memberList(a.ctx("status"), [aUrl]);
    expect(after.map((m) => m.status)).toEqual(["started", "started"]);
    expect(after.map((m) => m.name).sort()).toEqual([a.config.nodeId, b.config.nodeId].sort());

    await etcdctl(a.ctx("status"), [aUrl], ["put", "/keelson/test", "written-through-a"]);
    const read = await etcdctl(
      b.ctx("status"),
      [bUrl],
      ["get", "/keelson/test", "--print-value-only", "--consistency=l"],
    );
    expect(read.stdout.trim()).toBe("written-through-a");

    // Both status checks pass, and a second configure on b is a no-op (it is already a member).
    await startEtcd.status(a.ctx("status"));
    await startEtcd.status(b.ctx("status"));
    expect((await configureEtcd.start(b.ctx("start")))?.message).toMatch(/member already initialised/);
  }, 60_000);

  it("detaches the second master: it leaves the member list first, and the first keeps serving writes", async () => {
    const [a, b] = masters as [Master, Master];
    const aUrl = etcdUrls(a.ctx("status")).client;
    const left = await startEtcd.stop(b.ctx("detach"));
    expect(left?.message).toMatch(/removed etcd member [0-9a-f]+; 1 member\(s\) remain/);
    await configureEtcd.stop(b.ctx("detach"));
    expect((await b.services.status("etcd")).state).toBe("stopped");
    const members = await memberList(a.ctx("status"), [aUrl]);
    expect(members.map((m) => m.name)).toEqual([a.config.nodeId]);
    await etcdctl(a.ctx("status"), [aUrl], ["put", "/keelson/after", "still-writable"]);
    const read = await etcdctl(a.ctx("status"), [aUrl], ["get", "/keelson/after", "--print-value-only"]);
    expect(read.stdout.trim()).toBe("still-writable");
    await startEtcd.stop(a.ctx("stop"));
    expect(a.services.livePids()).toEqual({});
  }, 30_000);
});
