import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkEtcdHealth,
  countHealthy,
  countMembers,
  etcdHealthTarget,
  etcdWhole,
} from "../../src/node/etcd-health.ts";
import { genCerts } from "../../src/phases/impl/certs.ts";
import { configureEtcd, etcdUrls, startEtcd } from "../../src/phases/impl/etcd.ts";
import { type EtcdTestMaster, EtcdTestMasters } from "../phases/etcd-masters.ts";

/**
 * Three real etcd members with mutual TLS on 127.0.0.61-63, set up by the etcd phases; the
 * health check sees members added but unstarted, started, stopped and back.
 */

type Master = EtcdTestMaster;

const cluster = new EtcdTestMasters();
const masters = cluster.masters;
const master = (ip: string, etcdPeers: string[]) => cluster.add(ip, etcdPeers);

/**
 * `member add`, retried while etcd refuses a reconfiguration because the last member joined
 * less than ~5 s ago ("unhealthy cluster"), as leaveCluster does for `member remove`.
 */
async function addMember(m: Master): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await configureEtcd.start(m.ctx("start"));
      return;
    } catch (err) {
      if (!/unhealthy cluster/.test((err as Error).message) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

beforeAll(() => cluster.setUp("etcdh"), 20_000);

afterAll(() => cluster.close());

describe("etcd member health on a real cluster", () => {
  it("counts members (unstarted ones too) and the ones that answer", async () => {
    const a = await master("127.0.0.61", []);
    for (const phase of [genCerts, configureEtcd, startEtcd]) await phase.start(a.ctx("start"));
    const aUrl = etcdUrls(a.ctx("status")).client;
    const single = await checkEtcdHealth(etcdHealthTarget(a.config));
    expect(single).toMatchObject({ members: 1, healthy: 1 });
    expect(Date.parse(single.checkedAt)).toBeGreaterThan(Date.now() - 10_000);
    expect(etcdWhole(single)).toBe(true);

    // b is in the member list before it starts: two members, and without b no quorum, so
    // not even a answers a health check.
    const b = await master("127.0.0.62", [aUrl]);
    await genCerts.start(b.ctx("start"));
    await configureEtcd.start(b.ctx("start"));
    const added = await checkEtcdHealth(etcdHealthTarget(a.config, 2_000));
    expect(added).toMatchObject({ members: 2, healthy: 0 });
    expect(etcdWhole(added)).toBe(false);
    await startEtcd.start(b.ctx("start"));
    expect(await checkEtcdHealth(etcdHealthTarget(b.config))).toMatchObject({ members: 2, healthy: 2 });

    // c added but unstarted: three members, quorum kept, two of them healthy.
    const c = await master("127.0.0.63", [aUrl, etcdUrls(b.ctx("status")).client]);
    await genCerts.start(c.ctx("start"));
    await addMember(c);
    expect(await checkEtcdHealth(etcdHealthTarget(a.config, 2_000))).toMatchObject({ members: 3, healthy: 2 });
    await startEtcd.start(c.ctx("start"));
    // Asked through any member, the cluster is whole.
    for (const m of [a, b, c]) {
      const seen = await checkEtcdHealth(etcdHealthTarget(m.config));
      expect(seen).toMatchObject({ members: 3, healthy: 3 });
      expect(etcdWhole(seen)).toBe(true);
    }
  }, 90_000);

  it("a stopped member is still a member but not healthy; it counts again once it is back", async () => {
    const [a, , c] = masters as [Master, Master, Master];
    await startEtcd.stop(c.ctx("stop"));
    // c's own endpoint is down: the list comes through its peers, the health says 2 of 3.
    const started = Date.now();
    expect(await checkEtcdHealth(etcdHealthTarget(c.config, 2_000))).toMatchObject({ members: 3, healthy: 2 });
    expect(Date.now() - started).toBeLessThan(2 * 2_000 + 1_000);
    expect(await checkEtcdHealth(etcdHealthTarget(a.config, 2_000))).toMatchObject({ members: 3, healthy: 2 });
    await startEtcd.start(c.ctx("start"));
    expect(await checkEtcdHealth(etcdHealthTarget(c.config))).toMatchObject({ members: 3, healthy: 3 });
  }, 60_000);

  it("never throws: no etcdctl, wrong certificates or no member reachable read as 0 members", async () => {
    const [a] = masters as [Master];
    const target = etcdHealthTarget(a.config, 2_000);
    expect(await checkEtcdHealth({ ...target, etcdctl: join(a.config.hostRoot, "no-such-etcdctl") })).toMatchObject({
      members: 0,
      healthy: 0,
    });
    expect(
      await checkEtcdHealth({ ...target, tls: { ...target.tls, cert: join(a.config.hostRoot, "missing.crt") } }),
    ).toMatchObject({ members: 0, healthy: 0 });
    const started = Date.now();
    expect(await checkEtcdHealth({ ...target, endpoints: ["https://127.0.0.64:1"] })).toMatchObject({
      members: 0,
      healthy: 0,
    });
    expect(Date.now() - started).toBeLessThan(2 * 2_000 + 1_000);
    expect(etcdWhole({ members: 0, healthy: 0 })).toBe(false);
  }, 30_000);
});

describe("parsing etcdctl's json", () => {
  it("counts members and distinct healthy endpoints; garbage reads as nothing", () => {
    expect(countMembers('{"header":{},"members":[{"ID":1},{"ID":2,"name":""}]}')).toBe(2);
    expect(countMembers("not json")).toBeUndefined();
    expect(countMembers('{"header":{}}')).toBeUndefined();
    expect(countMembers(undefined)).toBeUndefined();
    expect(
      countHealthy(
        JSON.stringify([
          { endpoint: "https://a:2379", health: true },
          { endpoint: "https://a:2379", health: true },
          { endpoint: "https://b:2379", health: false, error: "context deadline exceeded" },
          { endpoint: "https://c:2379", health: true },
        ]),
      ),
    ).toBe(2);
    expect(countHealthy("{}")).toBe(0);
    expect(countHealthy("[")).toBe(0);
  });
});
