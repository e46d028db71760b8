import type { AddressInfo } from "node:net";
import {
  type AgentFrame,
  type CommandFrame,
  encodeFrame,
  type NodeReportFrame,
  PROTOCOL_VERSION,
  parseAgentFrame,
} from "@keelson/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { type Simulator, type SimulatorOptions, startSimulator } from "../../../../test/sim/index.ts";

/**
 * The simulator (test/sim) stands in for real agents in the control plane's attach tests, so
 * its node membership must behave like the node controller's: accept at once, report
 * converging then ok (or a failed phase), answer leave clean with an empty report.
 */

interface Peer {
  frames: AgentFrame[];
  ws: WebSocket;
}

async function fakeControlPlane() {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve) => wss.once("listening", () => resolve()));
  const peers: Peer[] = [];
  wss.on("connection", (ws) => {
    const peer: Peer = { frames: [], ws };
    peers.push(peer);
    ws.on("message", (data) => {
      const parsed = parseAgentFrame(data as Buffer);
      if (!parsed.ok) throw new Error(parsed.error.message);
      peer.frames.push(parsed.frame);
      if (parsed.frame.type === "hello") {
        ws.send(
          encodeFrame({
            type: "welcome",
            protocolVersion: PROTOCOL_VERSION,
            hostId: parsed.frame.hostId,
            projectId: "p1",
            heartbeatMs: 10_000,
          }),
        );
      }
    });
  });
  const port = (wss.address() as AddressInfo).port;
  return { wss, peers, linkUrl: `ws://127.0.0.1:${port}/link` };
}

function reports(peer: Peer): NodeReportFrame[] {
  return peer.frames.filter((f): f is NodeReportFrame => f.type === "node.report");
}

function result(peer: Peer, id: string) {
  return peer.frames.find((f) => f.type === "result" && f.id === id);
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

let n = 0;
function command(name: CommandFrame["name"], payload: unknown): CommandFrame {
  return { type: "command", id: `c${++n}`, name, payload, timeoutMs: 5000 } as CommandFrame;
}

const JOIN = {
  clusterId: "cluster-1",
  clusterName: "one",
  kubeRoleVersion: "1.29.0",
  settings: {},
  masterVipVrouterId: "",
  caCertPem: "-----BEGIN CERTIFICATE-----\n...",
  apiEndpoint: "https://10.0.0.1:443",
  etcdMembers: [],
};

let sim: Simulator | undefined;
let server: Awaited<ReturnType<typeof fakeControlPlane>> | undefined;
afterEach(async () => {
  await sim?.stop();
  server?.wss.close();
  sim = undefined;
  server = undefined;
});

async function start(options: Pick<SimulatorOptions, "phaseTimeMs" | "failPhase"> = {}) {
  server = await fakeControlPlane();
  sim = await startSimulator({
    url: "http://unused.invalid",
    linkUrl: server.linkUrl,
    identities: [{ hostId: "host-1", credential: "cred", projectId: "p1" }],
    count: 1,
    ...options,
  });
  const peer = server.peers[0] as Peer;
  // Every connect tells the control plane where the node stands: here, in no cluster.
  await waitFor("first report", () => reports(peer).length === 1);
  expect(reports(peer)[0]).toEqual({
    type: "node.report",
    clusterId: null,
    report: { status: "ok", phases: [] },
    apiResponding: false,
  });
  return peer;
}

describe("simulated node membership", () => {
  it("accepts node.join, reports converging then ok with every phase running, and leaves clean", async () => {
    const peer = await start({ phaseTimeMs: 30 });
    const join = command("node.join", { ...JOIN, role: "master" });
    peer.ws.send(encodeFrame(join));
    await waitFor("ok report", () => reports(peer).some((r) => r.report.status === "ok" && r.clusterId));
    expect(result(peer, join.id)).toMatchObject({ ok: true, result: { accepted: true } });
    const node = reports(peer).filter((r) => r.clusterId === "cluster-1");
    expect(node[0]?.report.status).toBe("converging");
    const final = node.at(-1) as NodeReportFrame;
    expect(final.apiResponding).toBe(true);
    expect(final.report.phases).toHaveLength(21);
    const running = final.report.phases.filter((p) => p.state === "running").map((p) => p.id);
    // drain is stop-only: like the real engine, start never runs it.
    expect(running).toHaveLength(20);
    expect(final.report.phases.find((p) => p.id === "drain-pods")?.state).toBe("not-started");

    const leave = command("node.leave", { clusterId: "cluster-1", lastNode: true });
    peer.ws.send(encodeFrame(leave));
    await waitFor("leave result", () => result(peer, leave.id) !== undefined);
    expect(result(peer, leave.id)).toMatchObject({ ok: true, result: { clean: true } });
    expect(reports(peer).at(-1)).toMatchObject({ clusterId: null, report: { status: "ok", phases: [] } });
    expect(sim?.agents[0]?.membership).toBeUndefined();
  });

  it("workers report their 15 phases and no API", async () => {
    const peer = await start();
    peer.ws.send(encodeFrame(command("node.join", { ...JOIN, role: "worker" })));
    await waitFor("ok", () => reports(peer).some((r) => r.report.status === "ok" && r.clusterId));
    const final = reports(peer).at(-1) as NodeReportFrame;
    expect(final.report.phases).toHaveLength(15);
    expect(final.apiResponding).toBe(false);
  });

  it("fails the configured phase (converging, then failed) and recovers when fixed", async () => {
    const peer = await start({
      failPhase: (hostname) => (hostname === "sim-00001" ? "kubelet" : undefined),
      phaseTimeMs: 10,
    });
    peer.ws.send(encodeFrame(command("node.join", { ...JOIN, role: "worker" })));
    await waitFor("failed", () => reports(peer).some((r) => r.report.status === "failed"));
    const statuses = reports(peer)
      .filter((r) => r.clusterId)
      .map((r) => r.report.status);
    expect(statuses).toEqual(["converging", "converging", "failed"]);
    const failed = reports(peer).at(-1) as NodeReportFrame;
    const kubelet = failed.report.phases.find((p) => p.id === "kubelet");
    expect(kubelet).toMatchObject({ state: "failed", lastError: expect.stringContaining("kubelet") });
    expect(failed.report.phases.find((p) => p.id === "kube-proxy")?.state).toBe("not-started");

    sim?.agents[0]?.setFailPhase(undefined);
    await waitFor("recovered", () => reports(peer).at(-1)?.report.status === "ok");
    expect((reports(peer).at(-1) as NodeReportFrame).report.phases.every((p) => p.state !== "failed")).toBe(true);
  });

  it("refuses to join a second cluster and reports its membership again after a reconnect", async () => {
    const peer = await start();
    peer.ws.send(encodeFrame(command("node.join", { ...JOIN, role: "worker" })));
    await waitFor("ok", () => reports(peer).some((r) => r.report.status === "ok" && r.clusterId));
    // The same join again (a control-plane restart re-sends it): accepted, nothing restarts.
    const before = reports(peer).length;
    const again1 = command("node.join", { ...JOIN, role: "worker" });
    peer.ws.send(encodeFrame(again1));
    await waitFor("re-join", () => result(peer, again1.id) !== undefined && reports(peer).length > before);
    expect(result(peer, again1.id)).toMatchObject({ ok: true, result: { accepted: true } });
    expect(
      reports(peer)
        .slice(before)
        .map((r) => r.report.status),
    ).toEqual(["ok"]);
    const other = command("node.join", { ...JOIN, clusterId: "cluster-2", role: "worker" });
    peer.ws.send(encodeFrame(other));
    await waitFor("refusal", () => result(peer, other.id) !== undefined);
    expect(result(peer, other.id)).toMatchObject({
      ok: false,
      error: { message: expect.stringContaining("cluster-1") },
    });

    sim?.agents[0]?.kill();
    await waitFor("reconnected", () => (server?.peers.length ?? 0) === 2);
    const again = server?.peers[1] as Peer;
    await waitFor("report after reconnect", () => reports(again).length === 1);
    expect(reports(again)[0]).toMatchObject({ clusterId: "cluster-1", report: { status: "ok" } });
  });
});
