import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AGENT_LINK_PATH,
  type AgentFrame,
  CloseCode,
  type ControlFrame,
  encodeFrame,
  type HelloPayload,
  type HostFacts,
  PROTOCOL_VERSION,
  parseAgentFrame,
} from "@keelson/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { retryAfterOf } from "../src/link/client.ts";
import { COMMAND_RECORD_FILE, CommandRecord } from "../src/link/command-record.ts";
import { ControlPlanes } from "../src/link/control-planes.ts";
import { type CommandHandlers, LinkClient, type LinkCloseInfo, LinkUnavailableError } from "../src/link/index.ts";
import { linkUrl } from "../src/link/url.ts";
import { ensureRegistered, IDENTITY_FILE, RegistrationError } from "../src/registration.ts";

const HOST = "host-1";
const CREDENTIAL = "khc_secret";

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
const helloPayload = (): HelloPayload => ({
  hostId: HOST,
  agentVersion: "0.1.0",
  hostname: "h1",
  primaryIp: "10.0.0.1",
  facts,
  agentStatus: "running",
});

const silentLog = { debug() {}, info() {}, warn() {}, error() {} };

interface Conn {
  ws: WebSocket;
  request: IncomingMessage;
  frames: AgentFrame[];
  next<T extends AgentFrame["type"]>(type: T): Promise<Extract<AgentFrame, { type: T }>>;
  send(frame: ControlFrame): void;
  closed: Promise<{ code: number; reason: string }>;
}

/** A control plane stand-in speaking the real protocol, with knobs for misbehaving. */
class FakeHub {
  readonly server: Server;
  readonly wss = new WebSocketServer({ noServer: true });
  readonly connections: Conn[] = [];
  private waiters: ((c: Conn) => void)[] = [];
  /** HTTP status to refuse upgrades with. */
  refuse: { status: number; body: object; headers?: Record<string, string> } | undefined;
  /** When each upgrade request arrived. */
  readonly upgradeAt: number[] = [];
  welcome = true;
  /** What the welcome announces (CONTROL_CAPABILITIES); undefined: nothing, like an older control plane. */
  capabilities: string[] | undefined;
  heartbeatMs = 1000;
  pingEveryMs: number | undefined = 50;

  constructor() {
    this.server = createServer();
    this.server.on("upgrade", (req, socket, head) => {
      this.upgradeAt.push(Date.now());
      if (this.refuse) {
        const body = JSON.stringify(this.refuse.body);
        const extra = Object.entries(this.refuse.headers ?? {})
          .map(([name, value]) => `${name}: ${value}\r\n`)
          .join("");
        socket.end(
          `HTTP/1.1 ${this.refuse.status} X\r\nContent-Type: application/json\r\n${extra}Content-Length: ${body.length}\r\n\r\n${body}`,
        );
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onConnection(ws, req));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  nextConnection(): Promise<Conn> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private onConnection(ws: WebSocket, request: IncomingMessage): void {
    const frames: AgentFrame[] = [];
    const waiters: { type: string; resolve: (f: AgentFrame) => void }[] = [];
    const conn: Conn = {
      ws,
      request,
      frames,
      send: (frame) => ws.send(encodeFrame(frame)),
      next: (type) => {
        const i = frames.findIndex((f) => f.type === type);
        if (i >= 0) return Promise.resolve(frames.splice(i, 1)[0] as never);
        return new Promise((resolve) => waiters.push({ type, resolve: resolve as (f: AgentFrame) => void }));
      },
      closed: new Promise((resolve) => ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() }))),
    };
    const pinger = this.pingEveryMs ? setInterval(() => ws.ping(), this.pingEveryMs) : undefined;
    ws.on("close", () => clearInterval(pinger));
    ws.on("message", (data) => {
      const parsed = parseAgentFrame(data as Buffer);
      if (!parsed.ok) throw new Error(`agent sent a bad frame: ${parsed.error.message}`);
      const frame = parsed.frame;
      if (frame.type === "hello" && this.welcome) {
        conn.send({
          type: "welcome",
          protocolVersion: PROTOCOL_VERSION,
          hostId: frame.hostId,
          projectId: "p1",
          heartbeatMs: this.heartbeatMs,
          ...(this.capabilities ? { capabilities: this.capabilities } : {}),
        });
      }
      const w = waiters.find((x) => x.type === frame.type);
      if (w) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(frame);
      } else frames.push(frame);
    });
    this.connections.push(conn);
    this.waiters.shift()?.(conn);
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.ws.terminate();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-link-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function setup(
  handlers: CommandHandlers = {},
  options: { stateDir?: string; hub?: FakeHub; welcomeTimeoutMs?: number } = {},
) {
  const hub = options.hub ?? new FakeHub();
  const url = await hub.listen();
  cleanups.push(() => hub.close());
  const stateDir = options.stateDir ?? tempDir();
  const client = new LinkClient({
    url,
    hostId: HOST,
    credential: CREDENTIAL,
    stateDir,
    log: silentLog,
    hello: helloPayload,
    handlers,
    backoff: { initialMs: 20, maxMs: 100 },
    ...(options.welcomeTimeoutMs ? { welcomeTimeoutMs: options.welcomeTimeoutMs } : {}),
  });
  cleanups.push(() => client.stop({ graceMs: 50 }));
  return { hub, client, stateDir, url };
}

const once = <T>(emitter: LinkClient, event: "connected" | "disconnected" | "fatal") =>
  new Promise<T>((resolve) => emitter.once(event, (arg: unknown) => resolve(arg as T)));

describe("LinkClient", () => {
  it("connects with the host credential, sends hello and reports connected on welcome", async () => {
    const { hub, client } = await setup();
    const conn = hub.nextConnection();
    const connected = once(client, "connected");
    client.start();
    const c = await conn;
    expect(c.request.url).toBe(AGENT_LINK_PATH);
    expect(c.request.headers.authorization).toBe(`Bearer ${CREDENTIAL}`);
    expect(c.request.headers["x-keelson-host-id"]).toBe(HOST);
    expect(await c.next("hello")).toEqual({
      type: "hello",
      protocolVersion: PROTOCOL_VERSION,
      capabilities: ["node-packages", "node-report-command", "node-sweep", "images", "control-plane-pins"],
      ...helloPayload(),
    });
    expect(await connected).toMatchObject({ type: "welcome", hostId: HOST, projectId: "p1" });
    expect(client.connected).toBe(true);
    expect(client.sendStatus({ agentStatus: "updating", agentVersion: "0.2.0" })).toBe(true);
    expect(await c.next("status")).toEqual({ type: "status", agentStatus: "updating", agentVersion: "0.2.0" });
    expect(client.sendFacts(facts)).toBe(true);
    expect((await c.next("facts")).facts).toEqual(facts);
  });

  it("names the command in node reports only to a control plane whose welcome says it takes the field", async () => {
    const report = { clusterId: "c1", report: { status: "ok" as const, phases: [] }, apiResponding: false };
    for (const capabilities of [undefined, ["node-report-command"]]) {
      const hub = new FakeHub();
      hub.capabilities = capabilities;
      const { client } = await setup({}, { hub });
      const conn = hub.nextConnection();
      const connected = once(client, "connected");
      client.start();
      const c = await conn;
      await connected;
      expect(client.sendNodeReport({ ...report, command: "op-1:node-1:node.restart" })).toBe(true);
      // An older control plane (no capability) would refuse the field: it is left out.
      expect(await c.next("node.report")).toEqual({
        type: "node.report",
        ...report,
        ...(capabilities ? { command: "op-1:node-1:node.restart" } : {}),
      });
      await client.stop({ graceMs: 50 });
    }
  });

  it("runs a command once and answers a re-delivered id from its record, also after a restart", async () => {
    let runs = 0;
    const handlers: CommandHandlers = {
      ping: async () => {
        runs++;
        return { at: `run-${runs}` };
      },
    };
    const { hub, client, stateDir } = await setup(handlers);
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const command: ControlFrame = { type: "command", id: "cmd-1", name: "ping", payload: {}, timeoutMs: 1000 };
    c.send(command);
    expect(await c.next("result")).toEqual({ type: "result", id: "cmd-1", ok: true, result: { at: "run-1" } });

    // The link drops and the control plane re-delivers the same id on the new connection.
    const reconnected = hub.nextConnection();
    c.ws.terminate();
    const c2 = await reconnected;
    await c2.next("hello");
    c2.send(command);
    expect(await c2.next("result")).toEqual({ type: "result", id: "cmd-1", ok: true, result: { at: "run-1" } });
    expect(runs).toBe(1);

    // A new agent process with the same state dir still remembers.
    await client.stop();
    const again = new LinkClient({
      url: linkUrl(`http://127.0.0.1:${(hub.server.address() as AddressInfo).port}`),
      hostId: HOST,
      credential: CREDENTIAL,
      stateDir,
      log: silentLog,
      hello: helloPayload,
      handlers,
    });
    cleanups.push(() => again.stop());
    const c3p = hub.nextConnection();
    again.start();
    const c3 = await c3p;
    await once(again, "connected");
    c3.send(command);
    expect((await c3.next("result")).ok).toBe(true);
    expect(runs).toBe(1);
    expect(JSON.parse(readFileSync(join(stateDir, COMMAND_RECORD_FILE), "utf8"))[0]).toMatchObject({
      id: "cmd-1",
      outcome: { ok: true },
    });
    expect(statSync(join(stateDir, COMMAND_RECORD_FILE)).mode & 0o777).toBe(0o600);
  });

  it("does not start a command again when its id is re-delivered while it still runs", async () => {
    let runs = 0;
    let finish: () => void = () => {};
    const { hub, client } = await setup({
      ping: () => {
        runs++;
        return new Promise((resolve) => (finish = () => resolve({ at: "done" })));
      },
    });
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const command: ControlFrame = { type: "command", id: "cmd-2", name: "ping", payload: {}, timeoutMs: 5000 };
    c.send(command);
    await new Promise((r) => setTimeout(r, 20));
    const reconnected = hub.nextConnection();
    c.ws.terminate();
    const c2 = await reconnected;
    await once(client, "connected");
    c2.send(command);
    await new Promise((r) => setTimeout(r, 20));
    finish();
    // The one result goes out on the link that is up when the command ends.
    expect(await c2.next("result")).toEqual({ type: "result", id: "cmd-2", ok: true, result: { at: "done" } });
    expect(runs).toBe(1);
    await new Promise((r) => setTimeout(r, 20));
    expect(c2.frames.filter((f) => f.type === "result")).toHaveLength(0);
  });

  it("answers TIMEOUT when a handler overruns and aborts its signal", async () => {
    let signal: AbortSignal | undefined;
    const { hub, client } = await setup({
      ping: (_p, ctx) => {
        signal = ctx.signal;
        return new Promise(() => {});
      },
    });
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const started = Date.now();
    c.send({ type: "command", id: "slow", name: "ping", payload: {}, timeoutMs: 80 });
    const result = await c.next("result");
    expect(Date.now() - started).toBeGreaterThanOrEqual(75);
    expect(result).toMatchObject({ id: "slow", ok: false, error: { code: "TIMEOUT" } });
    expect(signal?.aborted).toBe(true);
  });

  it("answers UNKNOWN_COMMAND, FAILED and BAD_RESULT without dropping the link", async () => {
    const { hub, client } = await setup({
      "agent.upgrade": async () => {
        throw new Error("no space left");
      },
    });
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    c.send({ type: "command", id: "u1", name: "ping", payload: {}, timeoutMs: 1000 });
    expect(await c.next("result")).toMatchObject({ ok: false, error: { code: "UNKNOWN_COMMAND" } });
    c.send({
      type: "command",
      id: "u2",
      name: "agent.upgrade",
      payload: { name: "a", version: "1", url: "file:///x" },
      timeoutMs: 1000,
    });
    expect(await c.next("result")).toMatchObject({ ok: false, error: { code: "FAILED", message: "no space left" } });
    // A command of a newer control plane, unknown to this build: answered, the link kept.
    // Sent as raw JSON: this build's own outgoing check refuses a command it does not know.
    c.ws.send(JSON.stringify({ type: "command", id: "u3", name: "node.future", payload: {}, timeoutMs: 1000 }));
    expect(await c.next("result")).toMatchObject({
      id: "u3",
      ok: false,
      error: { code: "UNKNOWN_COMMAND", message: expect.stringContaining("node.future") },
    });
    expect(client.connected).toBe(true);

    const { hub: hub2, client: client2 } = await setup({ ping: async () => ({ at: 5 }) as never });
    const conn2 = hub2.nextConnection();
    client2.start();
    const c2 = await conn2;
    await once(client2, "connected");
    c2.send({ type: "command", id: "b1", name: "ping", payload: {}, timeoutMs: 1000 });
    expect(await c2.next("result")).toMatchObject({ ok: false, error: { code: "BAD_RESULT" } });
  });

  it("answers INTERRUPTED for a command that was running when the previous process died", async () => {
    const stateDir = tempDir();
    writeFileSync(
      join(stateDir, COMMAND_RECORD_FILE),
      JSON.stringify([{ id: "x1", name: "ping", startedAt: "2024-01-01T00:00:00Z" }]),
    );
    let runs = 0;
    const { hub, client } = await setup({ ping: async () => ({ at: String(++runs) }) }, { stateDir });
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    c.send({ type: "command", id: "x1", name: "ping", payload: {}, timeoutMs: 1000 });
    expect(await c.next("result")).toMatchObject({ id: "x1", ok: false, error: { code: "INTERRUPTED" } });
    expect(runs).toBe(0);
  });

  it("is fatal, without retry, when the upgrade is refused with 401", async () => {
    const hub = new FakeHub();
    hub.refuse = { status: 401, body: { code: "credential_unknown", message: "the host credential is not valid" } };
    const { client } = await setup({}, { hub });
    const fatal = once<LinkCloseInfo>(client, "fatal");
    client.start();
    expect(await fatal).toMatchObject({ code: CloseCode.UNAUTHORIZED, reason: "the host credential is not valid" });
    await new Promise((r) => setTimeout(r, 150));
    expect(hub.connections).toHaveLength(0);
  });

  it.each([
    ["UNAUTHORIZED", CloseCode.UNAUTHORIZED],
    ["PROTOCOL_MISMATCH", CloseCode.PROTOCOL_MISMATCH],
  ])("is fatal after a %s close and does not reconnect", async (name, code) => {
    const { hub, client } = await setup();
    const conn = hub.nextConnection();
    const fatal = once<LinkCloseInfo>(client, "fatal");
    client.start();
    const c = await conn;
    await once(client, "connected");
    c.ws.close(code, "go away for good");
    expect(await fatal).toEqual({ code, codeName: name, reason: "go away for good" });
    await new Promise((r) => setTimeout(r, 150));
    expect(hub.connections).toHaveLength(1);
  });

  it("relinks on request after a command's result went out on the old link (control-plane pins changed)", async () => {
    let client!: LinkClient;
    const { hub, client: made } = await setup({
      ping: async () => {
        // As the control-plane.pins handler does: after its own answer has gone out.
        setImmediate(() => client.relink("the control-plane pins changed"));
        return { at: "now" };
      },
    });
    client = made;
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const again = hub.nextConnection();
    const back = once(client, "connected");
    c.send({ type: "command", id: "cmd-relink", name: "ping", payload: {}, timeoutMs: 1000 });
    expect(await c.next("result")).toEqual({ type: "result", id: "cmd-relink", ok: true, result: { at: "now" } });
    expect(await c.closed).toEqual({ code: 1000, reason: "the control-plane pins changed" });
    await (await again).next("hello");
    await back;
    expect(client.connected).toBe(true);
  });

  it("reconnects after going-away and after a refused (503) upgrade", async () => {
    const { hub, client } = await setup();
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const disconnected = once<LinkCloseInfo>(client, "disconnected");
    hub.refuse = { status: 503, body: { message: "shutting down" } };
    c.ws.close(CloseCode.GOING_AWAY, "control plane shutting down");
    expect(await disconnected).toMatchObject({ code: 1001, codeName: "GOING_AWAY" });
    await new Promise((r) => setTimeout(r, 100));
    hub.refuse = undefined;
    await hub.nextConnection();
    await once(client, "connected");
    expect(client.connected).toBe(true);
  });

  it("with several control planes, moves to the next when a link ends or an attempt fails, around the list", async () => {
    const hubs = [new FakeHub(), new FakeHub(), new FakeHub()];
    const urls: string[] = [];
    for (const hub of hubs) {
      urls.push(await hub.listen());
      cleanups.push(() => hub.close());
    }
    // Starts at the second (the random pick), as `() => 0.4` chooses.
    const client = new LinkClient({
      url: new ControlPlanes(urls, () => 0.4),
      hostId: HOST,
      credential: CREDENTIAL,
      stateDir: tempDir(),
      log: silentLog,
      hello: helloPayload,
      handlers: {},
      backoff: { initialMs: 20, maxMs: 100 },
    });
    cleanups.push(() => client.stop({ graceMs: 50 }));
    const [a, b, c] = hubs as [FakeHub, FakeHub, FakeHub];
    const onB = b.nextConnection();
    client.start();
    const first = await onB;
    await once(client, "connected");
    // The replica dies: the socket ends without a close frame (1006); the next is tried.
    const onC = c.nextConnection();
    c.refuse = { status: 502, body: { message: "bad gateway" } };
    const onA = a.nextConnection();
    first.ws.terminate();
    // c refuses the attempt, so it moves on again, around to a.
    await onA;
    await once(client, "connected");
    expect(c.upgradeAt.length).toBeGreaterThanOrEqual(1);
    expect(c.connections).toHaveLength(0);
    expect(a.connections).toHaveLength(1);
    expect(b.connections).toHaveLength(1);
    void onC;
  });

  it("waits the Retry-After of a control plane at its link ceiling (503) before trying again", async () => {
    const hub = new FakeHub();
    hub.refuse = {
      status: 503,
      body: { code: "link_capacity", message: "at the ceiling" },
      headers: { "Retry-After": "1" },
    };
    const { client } = await setup({}, { hub });
    const refused = new Promise<void>((resolve) => hub.server.once("upgrade", () => resolve()));
    client.start();
    await refused;
    await new Promise((r) => setTimeout(r, 50));
    hub.refuse = undefined;
    await once(client, "connected");
    // The backoff alone (20–100 ms here) would have come back at once; Retry-After said 1 s.
    const gap = (hub.upgradeAt[1] as number) - (hub.upgradeAt[0] as number);
    expect(gap).toBeGreaterThanOrEqual(1000);
    expect(gap).toBeLessThan(1500);
    expect(retryAfterOf("30")).toBe(30_000);
    expect(retryAfterOf("0")).toBe(1000);
    expect(retryAfterOf("99999")).toBe(600_000);
    expect(retryAfterOf("Wed, 21 Oct 2015 07:28:00 GMT")).toBeUndefined();
  });

  it("reconnects when the control plane goes silent (no pings for 2.5 heartbeats)", async () => {
    const hub = new FakeHub();
    hub.heartbeatMs = 40;
    hub.pingEveryMs = undefined;
    const { client } = await setup({}, { hub });
    const first = hub.nextConnection();
    client.start();
    await first;
    await once(client, "connected");
    const second = hub.nextConnection();
    const started = Date.now();
    await second;
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect(hub.connections).toHaveLength(2);
  });

  it("reconnects when no welcome arrives", async () => {
    const hub = new FakeHub();
    hub.welcome = false;
    const { client } = await setup({}, { hub, welcomeTimeoutMs: 60 });
    const first = hub.nextConnection();
    client.start();
    await first;
    await hub.nextConnection();
    expect(client.connected).toBe(false);
  });

  it("verifies project tokens over the link and refuses when offline", async () => {
    const { hub, client } = await setup();
    await expect(client.verifyProjectToken("kpt_x")).rejects.toBeInstanceOf(LinkUnavailableError);
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const answer = client.verifyProjectToken("kpt_x");
    const ask = await c.next("token.verify");
    expect(ask.token).toBe("kpt_x");
    c.send({ type: "token.verified", id: ask.id, valid: true });
    expect(await answer).toBe(true);
    // A question left unanswered when the link drops fails rather than hanging.
    const pending = client.verifyProjectToken("kpt_y");
    await c.next("token.verify");
    c.ws.terminate();
    await expect(pending).rejects.toBeInstanceOf(LinkUnavailableError);
  });

  it("stops gracefully: aborts a running command after the grace, sends its result, closes with going-away", async () => {
    const { hub, client } = await setup({
      ping: (_p, ctx) =>
        new Promise((_resolve, reject) => ctx.signal.addEventListener("abort", () => reject(new Error("aborted")))),
    });
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    c.send({ type: "command", id: "long", name: "ping", payload: {}, timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 20));
    await client.stop({ graceMs: 30 });
    expect(await c.next("result")).toMatchObject({ id: "long", ok: false, error: { code: "ABORTED" } });
    expect(await c.closed).toEqual({ code: CloseCode.GOING_AWAY, reason: "agent shutting down" });
    await new Promise((r) => setTimeout(r, 100));
    expect(hub.connections).toHaveLength(1);
  });

  it("a bad frame from the control plane closes the link with BAD_FRAME, then it reconnects", async () => {
    const { hub, client } = await setup();
    const conn = hub.nextConnection();
    client.start();
    const c = await conn;
    await once(client, "connected");
    const again = hub.nextConnection();
    // A known command whose payload breaks its schema (an unknown command is answered instead).
    c.ws.send(JSON.stringify({ type: "command", id: "1", name: "ping", payload: { disk: "/dev/sda" }, timeoutMs: 1 }));
    expect((await c.closed).code).toBe(CloseCode.BAD_FRAME);
    await again;
  });
});

describe("CommandRecord", () => {
  it("keeps only the most recent ids", () => {
    const dir = tempDir();
    const record = new CommandRecord(join(dir, "r.json"), 3);
    for (const id of ["a", "b", "c", "d"]) {
      record.start(id, "ping");
      record.finish(id, { ok: true, result: { at: id } });
    }
    expect(record.size).toBe(3);
    expect(record.get("a")).toBeUndefined();
    const reloaded = new CommandRecord(join(dir, "r.json"), 3);
    expect(reloaded.get("d")?.outcome).toEqual({ ok: true, result: { at: "d" } });
    expect(reloaded.get("a")).toBeUndefined();
  });

  it("starts afresh from an unreadable file", () => {
    const dir = tempDir();
    writeFileSync(join(dir, "r.json"), "{broken");
    expect(new CommandRecord(join(dir, "r.json")).size).toBe(0);
  });
});

describe("linkUrl", () => {
  it("derives the ws URL from the control plane URL", () => {
    expect(linkUrl("http://cp:8080")).toBe(`ws://cp:8080${AGENT_LINK_PATH}`);
    expect(linkUrl("https://cp.example/keelson/")).toBe(`wss://cp.example/keelson${AGENT_LINK_PATH}`);
    expect(linkUrl("ws://cp:1/custom")).toBe("ws://cp:1/custom");
    expect(() => linkUrl("ftp://cp")).toThrow(/http/);
  });
});

describe("ensureRegistered", () => {
  async function registrar(answers: { status: number; body: object }[]) {
    const bodies: unknown[] = [];
    const server = createServer((req, res) => {
      let text = "";
      req.on("data", (c) => (text += c));
      req.on("end", () => {
        bodies.push({ url: req.url, body: JSON.parse(text) });
        const answer = answers.shift() ?? { status: 500, body: {} };
        res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
  }

  it("registers once with the join token, keeps the identity 0600 and never needs the token again", async () => {
    const stateDir = tempDir();
    const { url, bodies } = await registrar([
      { status: 201, body: { hostId: "h9", credential: "khc_9", projectId: "p9" } },
    ]);
    const identity = await ensureRegistered({
      controlPlane: url,
      stateDir,
      joinToken: "kjt_1",
      hostname: "n1",
      primaryIp: "10.0.0.9",
    });
    expect(identity).toMatchObject({ hostId: "h9", credential: "khc_9", projectId: "p9" });
    expect(bodies).toEqual([
      {
        url: "/v1/agents/register",
        body: {
          joinToken: "kjt_1",
          credential: expect.stringMatching(/^khc_[A-Za-z0-9_-]{43}$/),
          hostname: "n1",
          primaryIp: "10.0.0.9",
        },
      },
    ]);
    expect(statSync(join(stateDir, IDENTITY_FILE)).mode & 0o777).toBe(0o600);
    const again = await ensureRegistered({ controlPlane: url, stateDir, hostname: "n1" });
    expect(again.hostId).toBe("h9");
    expect(bodies).toHaveLength(1);
  });

  it.each([
    ["join_token_used", "the join token has already been used; ask for a new one"],
    ["join_token_expired", "the join token has expired; ask for a new one"],
  ])("refuses clearly when the control plane answers %s", async (code, message) => {
    const stateDir = tempDir();
    const { url } = await registrar([{ status: 403, body: { code, message } }]);
    const err = await ensureRegistered({ controlPlane: url, stateDir, joinToken: "kjt_1", hostname: "n1" }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RegistrationError);
    expect(err).toMatchObject({ code, message: expect.stringContaining(message) });
  });

  it("needs a join token on first start", async () => {
    const err = await ensureRegistered({
      controlPlane: "http://127.0.0.1:1",
      stateDir: tempDir(),
      hostname: "n",
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "join_token_missing" });
  });

  it("retries a control plane that answers 5xx", async () => {
    const { url, bodies } = await registrar([
      { status: 503, body: { message: "starting" } },
      { status: 201, body: { hostId: "h", credential: "c", projectId: "p" } },
    ]);
    const identity = await ensureRegistered({
      controlPlane: url,
      stateDir: tempDir(),
      joinToken: "kjt",
      hostname: "n",
      backoff: { initialMs: 10 },
    });
    expect(identity.hostId).toBe("h");
    expect(bodies).toHaveLength(2);
  });

  it("with several control planes, a failed try moves to the next URL (a dead replica, then one answering 5xx)", async () => {
    // A port where nothing listens any more: connection refused.
    const gone = createServer();
    await new Promise<void>((r) => gone.listen(0, "127.0.0.1", r));
    const dead = { url: `http://127.0.0.1:${(gone.address() as AddressInfo).port}` };
    await new Promise<void>((r) => gone.close(() => r()));
    const failing = await registrar([{ status: 503, body: { message: "fenced" } }]);
    const live = await registrar([{ status: 201, body: { hostId: "h", credential: "c", projectId: "p" } }]);
    const identity = await ensureRegistered({
      controlPlane: new ControlPlanes([dead.url, failing.url, live.url], () => 0),
      stateDir: tempDir(),
      joinToken: "kjt",
      hostname: "n",
      backoff: { initialMs: 10 },
    });
    expect(identity).toMatchObject({ hostId: "h", controlPlane: live.url });
    expect([failing.bodies.length, live.bodies.length]).toEqual([1, 1]);
  });
});
