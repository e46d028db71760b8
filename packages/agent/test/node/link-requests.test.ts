import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AgentFrame,
  type ControlFrame,
  encodeFrame,
  type HostFacts,
  PROTOCOL_VERSION,
  parseAgentFrame,
} from "@keelson/protocol";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { CertificateRefusedError, LinkClient, LinkUnavailableError } from "../../src/link/index.ts";
import { bouncerVerifyUrl, registerBouncerEndpoint } from "../../src/node/bouncer-endpoint.ts";
import { StateDir } from "../../src/state-dir.ts";

/**
 * The link requests the node needs (cert.sign, cluster-token.verify, node.report) against a
 * control-plane stand-in, the bouncer's verify endpoint, and the controller's env knobs.
 */

const facts: HostFacts = {
  hostname: "h1",
  os: { platform: "linux", family: "debian", distro: "Debian", release: "12", kernel: "6.1" },
  arch: "x64",
  cpu: { model: "cpu", count: 1 },
  memory: { totalBytes: 1024 },
  disks: [],
  interfaces: [],
  primaryIp: "10.0.0.1",
  agentVersion: "0.1.0",
};

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function connectedClient(options: { signTimeoutMs?: number } = {}) {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((r) => wss.once("listening", () => r()));
  const frames: AgentFrame[] = [];
  let peer: WebSocket | undefined;
  wss.on("connection", (ws) => {
    peer = ws;
    ws.on("message", (data) => {
      const parsed = parseAgentFrame(data as Buffer);
      if (!parsed.ok) throw new Error(parsed.error.message);
      frames.push(parsed.frame);
      if (parsed.frame.type === "hello") {
        ws.send(
          encodeFrame({
            type: "welcome",
            protocolVersion: PROTOCOL_VERSION,
            hostId: "host-1",
            projectId: "p1",
            heartbeatMs: 10_000,
          }),
        );
      }
    });
  });
  const stateDir = mkdtempSync(join(tmpdir(), "k-linkreq-"));
  const client = new LinkClient({
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/agents/link`,
    hostId: "host-1",
    credential: "c",
    stateDir,
    log: { debug() {}, info() {}, warn() {}, error() {} },
    hello: () => ({
      hostId: "host-1",
      agentVersion: "0.1.0",
      hostname: "h1",
      primaryIp: "10.0.0.1",
      facts,
      agentStatus: "running",
    }),
    handlers: {},
    verifyTimeoutMs: 300,
    ...options,
  });
  cleanups.push(async () => {
    await client.stop({ graceMs: 10 });
    wss.close();
    rmSync(stateDir, { recursive: true, force: true });
  });
  const offline = client.signCertificate({ profile: "kubelet", csrPem: "x", dnsNames: [], ipAddresses: [] });
  await expect(offline).rejects.toThrow(/not connected to the control plane \(signing the kubelet certificate\)/);
  const connected = new Promise((r) => client.once("connected", r));
  client.start();
  await connected;
  const next = async <T extends AgentFrame["type"]>(type: T): Promise<Extract<AgentFrame, { type: T }>> => {
    const end = Date.now() + 3000;
    for (;;) {
      const i = frames.findIndex((f) => f.type === type);
      if (i >= 0) return frames.splice(i, 1)[0] as Extract<AgentFrame, { type: T }>;
      if (Date.now() > end) throw new Error(`no ${type} frame`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const send = (frame: ControlFrame) => peer?.send(encodeFrame(frame));
  return { client, next, send, peer: () => peer as WebSocket };
}

describe("link requests of the node", () => {
  it("signs a CSR through cert.sign, with the SANs, and surfaces a refusal", async () => {
    const { client, next, send } = await connectedClient();
    const request = {
      profile: "apiserver" as const,
      csrPem: "-----BEGIN CERTIFICATE REQUEST-----",
      dnsNames: ["kubernetes"],
      ipAddresses: ["10.0.0.1"],
    };
    const signing = client.signCertificate(request);
    const ask = await next("cert.sign");
    expect(ask).toMatchObject({ type: "cert.sign", ...request });
    // An answer of another kind with the same id settles nothing.
    send({ type: "cluster-token.verified", id: ask.id, subject: "x" });
    send({ type: "cert.signed", id: ask.id, ok: true, certPem: "CERT", caCertPem: "CA" });
    expect(await signing).toEqual({ certPem: "CERT", caCertPem: "CA" });

    const refused = client.signCertificate({ ...request, profile: "etcd-peer" });
    const ask2 = await next("cert.sign");
    send({ type: "cert.signed", id: ask2.id, ok: false, error: { code: "REFUSED", message: "not a master" } });
    const err = await refused.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CertificateRefusedError);
    expect(err).toMatchObject({ code: "REFUSED", message: "not a master" });
  });

  it("times out an unanswered signing request and gives up when aborted", async () => {
    const { client, next } = await connectedClient({ signTimeoutMs: 100 });
    const request = { profile: "kubelet" as const, csrPem: "x", dnsNames: [], ipAddresses: [] };
    await expect(client.signCertificate(request)).rejects.toThrow(/did not answer signing the kubelet certificate/);
    await next("cert.sign");
    const controller = new AbortController();
    const pending = client.signCertificate(request, { signal: controller.signal, timeoutMs: 10_000 });
    await next("cert.sign");
    controller.abort(new Error("phase aborted"));
    await expect(pending).rejects.toThrow("phase aborted");
  });

  it("verifies cluster tokens, and fails pending requests when the link drops", async () => {
    const { client, next, send, peer } = await connectedClient();
    const verifying = client.verifyClusterToken("tok-1");
    const ask = await next("cluster-token.verify");
    expect(ask.token).toBe("tok-1");
    send({ type: "cluster-token.verified", id: ask.id, subject: "admin@c1" });
    expect(await verifying).toBe("admin@c1");
    const invalid = client.verifyClusterToken("tok-2");
    send({ type: "cluster-token.verified", id: (await next("cluster-token.verify")).id, subject: null });
    expect(await invalid).toBeNull();

    const pending = client.verifyClusterToken("tok-3");
    await next("cluster-token.verify");
    peer().terminate();
    await expect(pending).rejects.toBeInstanceOf(LinkUnavailableError);
  });

  it("sends node reports while connected", async () => {
    const { client, next } = await connectedClient();
    const report = { clusterId: "c1", report: { status: "converging" as const, phases: [] }, apiResponding: false };
    expect(client.sendNodeReport(report)).toBe(true);
    expect(await next("node.report")).toEqual({ type: "node.report", ...report });
  });
});

describe("the bouncer's verify endpoint", () => {
  it("answers the bouncer's contract, only on its secret path, 503 without the control plane", async () => {
    const dir = mkdtempSync(join(tmpdir(), "k-bouncer-"));
    const app = Fastify();
    let online = true;
    const endpoint = registerBouncerEndpoint(app, {
      stateDir: new StateDir(dir).ensure(),
      verify: async (token) => {
        if (!online) throw new LinkUnavailableError("not connected to the control plane");
        return token === "good" ? "admin@c1" : null;
      },
    });
    cleanups.push(async () => {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const post = (url: string, payload: Record<string, unknown>) => app.inject({ method: "POST", url, payload });
    expect((await post(endpoint.path, { token: "good" })).json()).toEqual({
      valid: true,
      username: "admin@c1",
      // The group the cluster's bootstrap ClusterRoleBinding makes cluster-admin.
      groups: ["keelson:cluster-admins"],
    });
    expect((await post(endpoint.path, { token: "bad" })).json()).toEqual({ valid: false });
    expect((await post(endpoint.path.replace(/.$/, "x"), { token: "good" })).statusCode).toBe(404);
    const bad = await post(endpoint.path, { token: 42 });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().field).toBe("token");
    online = false;
    expect((await post(endpoint.path, { token: "good" })).statusCode).toBe(503);
    // The secret survives restarts: the bouncer's command line stays valid.
    const again = registerBouncerEndpoint(Fastify(), { stateDir: new StateDir(dir), verify: async () => null });
    expect(again.path).toBe(endpoint.path);
    expect(bouncerVerifyUrl({ host: "0.0.0.0", port: 8082 }, "/p")).toBe("http://127.0.0.1:8082/p");
    expect(bouncerVerifyUrl({ host: "::", port: 8082 }, "/p")).toBe("http://[::1]:8082/p");
  });
});
