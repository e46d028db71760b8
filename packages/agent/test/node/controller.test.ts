import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NodeController, type NodeControllerOptions, NodeMembershipError } from "../../src/node/controller.ts";
import { DESIRED_STATE_FILE, loadDesiredState } from "../../src/node/desired-state.ts";
import {
  FakeLink,
  fakeNodeControllerOptions,
  joinPayload,
  noServices,
  type PhaseCall,
  tempDir,
  waitFor,
} from "./helpers.ts";

/**
 * The node controller with the real phase engine and reconcile loop, over stand-in phases
 * (../phases/ covers the real ones; real-node.test.ts runs them through the controller too).
 */

let root: string;
let stateDir: string;
let hostRoot: string;
let link: FakeLink;
let calls: PhaseCall[];
let services: ReturnType<typeof noServices>;
const controllers: NodeController[] = [];

beforeEach(() => {
  root = tempDir("node");
  stateDir = join(root, "state");
  hostRoot = join(root, "host");
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(hostRoot, { recursive: true });
  link = new FakeLink();
  calls = [];
  services = noServices();
});

afterEach(async () => {
  await Promise.all(controllers.splice(0).map((c) => c.close()));
  rmSync(root, { recursive: true, force: true });
});

function controller(overrides: Partial<NodeControllerOptions> = {}): NodeController {
  const c = new NodeController(
    fakeNodeControllerOptions({ root, stateDir, hostRoot, link, calls, services }, overrides),
  );
  controllers.push(c);
  return c;
}

const ok = () => link.last()?.report.status === "ok" && link.last()?.clusterId === "cluster-1";

describe("node.join", () => {
  it("persists the membership, accepts at once, and reports converging then ok with every phase running", async () => {
    const node = controller();
    const answer = await node.join(joinPayload());
    expect(answer).toEqual({ accepted: true });
    // Persisted before the answer: a crash right after still resumes the node.
    const saved = loadDesiredState(join(stateDir, DESIRED_STATE_FILE));
    expect(saved?.join.clusterId).toBe("cluster-1");
    expect(saved).toMatchObject({ hostname: "worker-1", primaryIp: "10.0.0.7" });

    await waitFor("ok report", ok);
    const statuses = link.reports.map((r) => r.report.status);
    expect(statuses[0]).toBe("converging");
    const final = link.last()!;
    expect(final.apiResponding).toBe(false);
    expect(final.report.phases).toHaveLength(15);
    expect(final.report.phases.filter((p) => p.state !== "running").map((p) => p.id)).toEqual(["drain-pods"]);
    // Coalesced: 14 phases each went executing -> running (28 changes); fewer reports went out.
    expect(link.reports.length).toBeLessThan(20);
    // A first join issues certificates anew, whatever an earlier membership left behind.
    expect(calls.find((c) => c.id === "gen-certs" && c.action === "start")?.regenerateCerts).toBe(true);
    expect(node.snapshot()).toMatchObject({ clusterId: "cluster-1", role: "worker", nodeStatus: "ok" });
  });

  it("masters run all 21 phases", async () => {
    const node = controller();
    await node.join(joinPayload({ role: "master" }));
    await waitFor("ok", ok);
    expect(link.last()?.report.phases).toHaveLength(21);
  });

  it("refuses another cluster or another role while a member, and takes the same join again without restarting", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    await expect(node.join(joinPayload({ clusterId: "cluster-2" }))).rejects.toThrow(
      /node of cluster cluster-1; detach it/,
    );
    await expect(node.join(joinPayload({ role: "master" }))).rejects.toBeInstanceOf(NodeMembershipError);
    const starts = calls.filter((c) => c.action === "start").length;
    const reports = link.reports.length;
    expect(await node.join(joinPayload())).toEqual({ accepted: true });
    await waitFor("a report", () => link.reports.length > reports);
    expect(calls.filter((c) => c.action === "start").length).toBe(starts);
    expect(link.last()?.report.status).toBe("ok");
  });

  it("rebuilds the engine when a join brings a changed configuration", async () => {
    const node = controller();
    await node.join(joinPayload({ role: "master" }));
    await waitFor("ok", ok);
    await node.join(
      joinPayload({
        role: "master",
        etcdMembers: [{ name: "host-9", peerUrl: "https://10.0.0.9:2380", clientUrl: "https://10.0.0.9:2379" }],
      }),
    );
    expect(loadDesiredState(join(stateDir, DESIRED_STATE_FILE))?.join.etcdMembers).toHaveLength(1);
    await waitFor("ok again", ok);
  });

  it("goes converging, then failed after the retry budget with the phase's error, and recovers once fixed", async () => {
    writeFileSync(join(hostRoot, "fail-kubelet"), "");
    const node = controller();
    await node.join(joinPayload());
    await waitFor("failed", () => link.last()?.report.status === "failed", 5000);
    const statuses = link.reports.map((r) => r.report.status);
    expect(statuses.indexOf("converging")).toBeLessThan(statuses.indexOf("failed"));
    const kubelet = link.last()?.report.phases.find((p) => p.id === "kubelet");
    expect(kubelet).toMatchObject({ state: "failed", lastError: "kubelet: the test switch says fail" });
    expect(node.snapshot().nodeStatus).toBe("failed");

    rmSync(join(hostRoot, "fail-kubelet"));
    await waitFor("recovered", ok, 5000);
    expect(link.last()?.report.phases.find((p) => p.id === "kubelet")).toMatchObject({
      state: "running",
      lastError: null,
    });
  });

  it("reports again after every reconnect, and what an unattached host reports", async () => {
    const node = controller();
    node.connected();
    await waitFor("report", () => link.reports.length === 1);
    expect(link.last()).toEqual({ clusterId: null, report: { status: "ok", phases: [] }, apiResponding: false });
    await node.join(joinPayload());
    await waitFor("ok", ok);
    link.connected = false;
    const count = link.reports.length;
    writeFileSync(join(hostRoot, "fail-uncordon"), "");
    await waitFor("converging while offline", () => node.snapshot().nodeStatus !== "ok");
    expect(link.reports.length).toBe(count);
    link.connected = true;
    node.connected();
    await waitFor("caught up", () => link.reports.length > count);
    expect(link.reports[count]?.report.status).not.toBe("ok");
  });
});

describe("agent restart", () => {
  it("resumes the node from the state dir: checks status instead of starting, reuses certificates", async () => {
    const first = controller();
    await first.join(joinPayload());
    await waitFor("ok", ok);
    await first.close();
    calls.length = 0;
    link.reports = [];

    const second = controller();
    expect(second.clusterId).toBe("cluster-1");
    await second.resume();
    await waitFor("ok after resume", ok);
    expect(calls.some((c) => c.action === "start")).toBe(false);
    expect(calls.some((c) => c.action === "status")).toBe(true);
  });

  it("starts what is not running after a restart, without regenerating certificates unless asked", async () => {
    const first = controller();
    await first.join(joinPayload());
    await waitFor("ok", ok);
    await first.close();
    // While the agent was down a phase's work vanished.
    rmSync(join(hostRoot, "etc", "keelson", "kube-proxy.started"));
    calls.length = 0;
    link.reports = [];
    const second = controller();
    await second.resume();
    await waitFor("kube-proxy started again", () => calls.some((c) => c.action === "start" && c.id === "kube-proxy"));
    await waitFor("ok after repair", ok);
    expect(calls.filter((c) => c.action === "start" && c.id === "kube-proxy").length).toBeGreaterThan(0);
    expect(calls.filter((c) => c.regenerateCerts)).toEqual([]);

    await second.close();
    calls.length = 0;
    const regenerate = controller({ tuning: { regenerateCerts: true } });
    await regenerate.resume();
    await waitFor("gen-certs start", () => calls.some((c) => c.id === "gen-certs" && c.action === "start"));
    expect(calls.find((c) => c.id === "gen-certs" && c.action === "start")?.regenerateCerts).toBe(true);
  });

  it("refuses to start on a desired-state file it cannot read instead of forgetting the membership", () => {
    writeFileSync(join(stateDir, DESIRED_STATE_FILE), "{ not json");
    expect(() => controller()).toThrow(/node\.json is not valid JSON/);
    writeFileSync(join(stateDir, DESIRED_STATE_FILE), JSON.stringify({ version: 1, join: {} }));
    expect(() => controller()).toThrow(/not a node desired state/);
  });
});

describe("node.leave", () => {
  it("drains, stops descending with the detach intent, cleans the host root, forgets the membership", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    calls.length = 0;
    expect(await node.leave({ clusterId: "cluster-1", lastNode: false })).toEqual({ clean: true });
    const stops = calls.filter((c) => c.action === "stop");
    expect(stops[0]?.id).toBe("drain-pods");
    expect(stops.map((c) => c.id)).toEqual([
      "drain-pods",
      "uncordon",
      "dynamic-kubelet-config",
      "node-taints",
      "wait-for-services",
      "kube-proxy",
      "kubelet",
      "misc-checks",
      "configure-cni",
      "network-config",
      "load-user-images",
      "start-runtime",
      "configure-runtime",
      "prepare-config",
      "gen-certs",
    ]);
    expect(stops.every((c) => c.intent === "detach")).toBe(true);
    expect(existsSync(join(hostRoot, "etc", "keelson"))).toBe(false);
    expect(existsSync(join(stateDir, DESIRED_STATE_FILE))).toBe(false);
    expect(existsSync(join(stateDir, "phases.json"))).toBe(false);
    expect(services.uninstalled).toContain("kubelet");
    expect(link.last()).toEqual({ clusterId: null, report: { status: "ok", phases: [] }, apiResponding: false });
    expect(node.snapshot()).toEqual({ clusterId: null, role: null, nodeStatus: "ok", phases: [] });
    // Asked again (re-sent after a reconnect): already clean.
    expect(await node.leave({ clusterId: "cluster-1", lastNode: false })).toEqual({ clean: true });
    // And it may join again afterwards, as a new member.
    await node.join(joinPayload({ clusterId: "cluster-2", role: "master" }));
    await waitFor(
      "ok in cluster-2",
      () => link.last()?.clusterId === "cluster-2" && link.last()?.report.status === "ok",
    );
  });

  it("does not drain the cluster's last node", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    calls.length = 0;
    await node.leave({ clusterId: "cluster-1", lastNode: true });
    expect(calls.some((c) => c.id === "drain-pods")).toBe(false);
  });

  it("leaves despite a failed drain, but not when a phase cannot stop (the membership stays)", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    writeFileSync(join(hostRoot, "nostop-drain-pods"), "");
    writeFileSync(join(hostRoot, "nostop-kubelet"), "");
    await expect(node.leave({ clusterId: "cluster-1", lastNode: false })).rejects.toThrow(
      /cannot leave cluster cluster-1: kubelet did not stop: kubelet: will not stop/,
    );
    expect(existsSync(join(stateDir, DESIRED_STATE_FILE))).toBe(true);
    expect(link.last()).toMatchObject({ clusterId: "cluster-1", report: { status: "failed" } });

    rmSync(join(hostRoot, "nostop-kubelet"));
    expect(await node.leave({ clusterId: "cluster-1", lastNode: false })).toEqual({ clean: true });
    expect(existsSync(join(stateDir, DESIRED_STATE_FILE))).toBe(false);
  });

  it("runs the phases again when the control plane re-sends the join after a failed leave", async () => {
    const node = controller();
    await node.join(joinPayload());
    await waitFor("ok", ok);
    writeFileSync(join(hostRoot, "nostop-kube-proxy"), "");
    await expect(node.leave({ clusterId: "cluster-1", lastNode: true })).rejects.toThrow(/kube-proxy did not stop/);
    rmSync(join(hostRoot, "nostop-kube-proxy"));
    expect(await node.join(joinPayload())).toEqual({ accepted: true });
    await waitFor("ok again", ok);
    expect(node.snapshot().nodeStatus).toBe("ok");
  });

  it("refuses to leave a cluster it is not in", async () => {
    const node = controller();
    await node.join(joinPayload());
    await expect(node.leave({ clusterId: "cluster-9", lastNode: false })).rejects.toThrow(
      /node of cluster cluster-1, not of cluster-9/,
    );
    expect(readFileSync(join(stateDir, DESIRED_STATE_FILE), "utf8")).toContain("cluster-1");
  });
});
