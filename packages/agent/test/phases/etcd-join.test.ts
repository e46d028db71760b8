import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { genCerts } from "../../src/phases/impl/certs.ts";
import { configureEtcd, etcdctl, etcdUrls, memberList, startEtcd } from "../../src/phases/impl/etcd.ts";
import { type EtcdTestMaster, EtcdTestMasters } from "./etcd-masters.ts";

/**
 * Two masters on 127.0.0.11 and 127.0.0.12 form one real etcd cluster through the phases: the
 * first bootstraps, the second is added with `member add` before it starts. Data written
 * through one member is read through the other; the second leaves with detach.
 */

type Master = EtcdTestMaster;

const cluster = new EtcdTestMasters();
const masters = cluster.masters;
const master = (ip: string, etcdPeers: string[]) => cluster.add(ip, etcdPeers);

beforeAll(() => cluster.setUp("join"), 20_000);

afterAll(() => cluster.close());

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
