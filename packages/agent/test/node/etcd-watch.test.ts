import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeController } from "../../src/node/controller.ts";
import type { EtcdHealth, EtcdHealthTarget } from "../../src/node/etcd-health.ts";
import { EtcdHealthWatch, type EtcdSubject } from "../../src/node/etcd-watch.ts";
import {
  FakeLink,
  fakeNodeControllerOptions,
  joinPayload,
  noServices,
  type PhaseCall,
  tempDir,
  waitFor,
} from "./helpers.ts";

const target: EtcdHealthTarget = {
  etcdctl: "/nonexistent/etcdctl",
  endpoints: ["https://10.0.0.7:2379"],
  tls: { caCert: "ca", cert: "c", key: "k" },
  timeoutMs: 1000,
};

/** A cluster the test changes at will; every check is counted. */
class FakeEtcd {
  members = 3;
  healthy = 3;
  checks = 0;
  fail = false;
  check = async (): Promise<EtcdHealth> => {
    this.checks++;
    if (this.fail) throw new Error("etcdctl exploded");
    return { members: this.members, healthy: this.healthy, checkedAt: new Date().toISOString() };
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("EtcdHealthWatch", () => {
  let etcd: FakeEtcd;
  let subject: EtcdSubject | undefined;
  let changes: number;
  const watches: EtcdHealthWatch[] = [];
  const watch = (extra: { fastChecks?: number; slowIntervalMs?: number } = {}) => {
    const w = new EtcdHealthWatch({
      subject: () => subject,
      changed: () => changes++,
      check: etcd.check,
      intervalMs: 20,
      ...extra,
    });
    watches.push(w);
    return w;
  };

  beforeEach(() => {
    etcd = new FakeEtcd();
    subject = { run: "run-1", target };
    changes = 0;
  });
  afterEach(() => {
    for (const w of watches.splice(0)) w.close();
  });

  it("reports nothing and checks nothing without a subject (a worker, or etcd not running)", async () => {
    subject = undefined;
    expect(await watch().forReport()).toBeUndefined();
    await sleep(60);
    expect(etcd.checks).toBe(0);
  });

  it("checks once per run while whole: later reports reuse the result, nothing re-checks", async () => {
    const w = watch();
    expect(await w.forReport()).toMatchObject({ members: 3, healthy: 3 });
    expect(await w.forReport()).toMatchObject({ members: 3, healthy: 3 });
    await sleep(80);
    expect(etcd.checks).toBe(1);
    expect(changes).toBe(0);
  });

  it("re-checks while not whole, asks for a report when the counts change, and stops once whole", async () => {
    etcd.healthy = 2;
    const w = watch();
    expect(await w.forReport()).toMatchObject({ members: 3, healthy: 2 });
    await waitFor("re-checks", () => etcd.checks >= 3, 1000);
    // Same counts: no report asked for.
    expect(changes).toBe(0);
    etcd.healthy = 3;
    await waitFor("a report asked for", () => changes === 1, 1000);
    expect(await w.forReport()).toMatchObject({ members: 3, healthy: 3 });
    const checks = etcd.checks;
    await sleep(80);
    expect(etcd.checks).toBe(checks);
  });

  it("never carries a check of an earlier run: a new start of etcd checks again", async () => {
    const w = watch();
    expect(await w.forReport()).toMatchObject({ healthy: 3 });
    etcd.healthy = 1;
    subject = { run: "run-2", target };
    expect(await w.forReport()).toMatchObject({ healthy: 1 });
    expect(etcd.checks).toBe(2);
  });

  it("stops re-checking when the subject goes away (leave, stop) or the watch closes", async () => {
    etcd.healthy = 0;
    const w = watch();
    await w.forReport();
    subject = undefined;
    await sleep(60);
    const afterLeave = etcd.checks;
    await sleep(60);
    expect(etcd.checks).toBe(afterLeave);
    expect(afterLeave).toBeLessThanOrEqual(2);

    subject = { run: "run-3", target };
    const v = watch();
    await v.forReport();
    v.close();
    const afterClose = etcd.checks;
    await sleep(60);
    expect(etcd.checks).toBe(afterClose);
    expect(await v.forReport()).toBeUndefined();
  });

  it("slows down after its fast re-checks (a member down for good)", async () => {
    etcd.healthy = 2;
    const w = watch({ fastChecks: 2, slowIntervalMs: 10_000 });
    await w.forReport();
    await sleep(150);
    // The first check, two fast re-checks, then nothing for the slow interval.
    expect(etcd.checks).toBe(3);
  });

  it("a check that throws reads as 0 members, 0 healthy, and the report still goes out", async () => {
    etcd.fail = true;
    expect(await watch().forReport()).toMatchObject({ members: 0, healthy: 0 });
  });
});

describe("a master's node reports", () => {
  let root: string;
  let link: FakeLink;
  let calls: PhaseCall[];
  let etcd: FakeEtcd;
  const controllers: NodeController[] = [];

  beforeEach(() => {
    root = tempDir("etcdw");
    mkdirSync(join(root, "state"), { recursive: true });
    mkdirSync(join(root, "host"), { recursive: true });
    link = new FakeLink();
    calls = [];
    etcd = new FakeEtcd();
  });
  afterEach(async () => {
    await Promise.all(controllers.splice(0).map((c) => c.close()));
    rmSync(root, { recursive: true, force: true });
  });

  const controller = () => {
    const c = new NodeController(
      fakeNodeControllerOptions(
        {
          root,
          stateDir: join(root, "state"),
          hostRoot: join(root, "host"),
          link,
          calls,
          services: noServices(),
        },
        { etcdCheck: etcd.check },
      ),
    );
    controllers.push(c);
    return c;
  };
  const ok = () => link.last()?.report.status === "ok";
  const etcdRunning = (r: (typeof link.reports)[number]) =>
    r.report.phases.some((p) => p.id === "start-etcd" && p.state === "running");

  it("carry etcd once start-etcd runs, and a later report once etcd is whole again", async () => {
    etcd.healthy = 2;
    const node = controller();
    await node.join(joinPayload({ role: "master" }));
    await waitFor("ok", ok);
    for (const r of link.reports) {
      if (etcdRunning(r)) expect(r.etcd).toMatchObject({ members: 3, healthy: 2 });
      else expect(r.etcd).toBeUndefined();
    }
    const count = link.reports.length;
    etcd.healthy = 3;
    // No phase changes: only the re-check (every second) can bring this report.
    await waitFor("the whole-again report", () => link.last()?.etcd?.healthy === 3, 3000);
    expect(link.reports.length).toBe(count + 1);
    expect(link.last()?.report.status).toBe("ok");
  });

  it("after a restart, report a fresh check, not the one from before etcd restarted", async () => {
    const node = controller();
    await node.join(joinPayload({ role: "master" }));
    await waitFor("ok", ok);
    expect(link.last()?.etcd).toMatchObject({ members: 3, healthy: 3 });
    const checks = etcd.checks;
    etcd.healthy = 2;
    link.reports = [];
    await node.restart({ clusterId: "cluster-1", regenerateCerts: false });
    await waitFor("ok again", ok);
    expect(etcd.checks).toBeGreaterThan(checks);
    // The converging report before the stop carries none; none after it carries the old 3 of 3.
    expect(link.reports[0]?.etcd).toBeUndefined();
    expect(link.reports.filter((r) => r.etcd?.healthy === 3)).toEqual([]);
    expect(link.last()?.etcd).toMatchObject({ members: 3, healthy: 2 });
  });

  it("workers carry none, and the check is never run for them", async () => {
    const node = controller();
    await node.join(joinPayload({ role: "worker" }));
    await waitFor("ok", ok);
    expect(link.reports.every((r) => r.etcd === undefined)).toBe(true);
    expect(etcd.checks).toBe(0);
  });
});
