import { existsSync, mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { firstRow, hostPresence, joinTokens, nodePools, nodes } from "@keelson/db";
import {
  AGENT_LINK_PATH,
  CloseCode,
  type ControlFrame,
  type HelloFrame,
  type HostFacts,
  PROTOCOL_VERSION,
  parseControlFrame,
} from "@keelson/protocol";
import { eq, inArray } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ensureRegistered, PENDING_REGISTRATION_FILE } from "../../agent/src/registration.ts";
import { CommandFailedError, CommandTimeoutError, HostOfflineError } from "../src/agents/errors.ts";
import { SessionRegistry } from "../src/agents/sessions.ts";
import { PresenceWriter } from "../src/domain/hosts/presence.ts";
import { hashSecret } from "../src/domain/identity/token-hash.ts";
import { inProcessChannels } from "../src/replicas/channels.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";

const facts = (hostname: string): HostFacts => ({
  hostname,
  os: { platform: "linux", family: "debian", distro: "Ubuntu", release: "22.04", kernel: "6.5.0" },
  arch: "x64",
  cpu: { model: "Test CPU", count: 2 },
  memory: { totalBytes: 4 * 1024 ** 3 },
  disks: [],
  interfaces: [{ name: "eth0", mac: "02:00:00:00:00:01", addresses: ["10.1.2.3"] }],
  primaryIp: "10.1.2.3",
  agentVersion: "0.1.0",
});

const hello = (hostId: string, overrides: Partial<HelloFrame> = {}): HelloFrame => ({
  type: "hello",
  protocolVersion: PROTOCOL_VERSION,
  hostId,
  agentVersion: "0.1.0",
  hostname: "worker-1",
  primaryIp: "10.1.2.3",
  facts: facts("worker-1"),
  agentStatus: "running",
  ...overrides,
});

interface Peer {
  ws: WebSocket;
  frames: ControlFrame[];
  next<T extends ControlFrame["type"]>(type: T): Promise<Extract<ControlFrame, { type: T }>>;
  closed: Promise<{ code: number; reason: string }>;
  send(frame: unknown): void;
}

/** A raw protocol peer: lets a test send anything, including frames a real agent never would. */
function connect(
  url: string,
  credential: string | undefined,
  options: WebSocket.ClientOptions & { hostId?: string } = {},
): Promise<Peer> {
  const headers: Record<string, string> = {};
  if (credential !== undefined) headers.authorization = `Bearer ${credential}`;
  if (options.hostId) headers["x-keelson-host-id"] = options.hostId;
  const ws = new WebSocket(url, { ...options, headers });
  const frames: ControlFrame[] = [];
  const waiters: { type: string; resolve: (f: ControlFrame) => void }[] = [];
  ws.on("message", (data) => {
    const parsed = parseControlFrame(data as Buffer);
    if (!parsed.ok) throw new Error(parsed.error.message);
    const waiter = waiters.find((w) => w.type === parsed.frame.type);
    if (waiter) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(parsed.frame);
    } else frames.push(parsed.frame);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return new Promise((resolve, reject) => {
    ws.once("open", () =>
      resolve({
        ws,
        frames,
        closed,
        send: (frame) => ws.send(typeof frame === "string" ? frame : JSON.stringify(frame)),
        next: (type) => {
          const queued = frames.findIndex((f) => f.type === type);
          if (queued >= 0) return Promise.resolve(frames.splice(queued, 1)[0] as never);
          return new Promise((res) => waiters.push({ type, resolve: res as (f: ControlFrame) => void }));
        },
      }),
    );
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode, body })));
    });
    ws.once("error", reject);
  });
}

/** A peer past its hello: connected with the host's credential and welcomed. */
async function linked(url: string, credential: string, hostId: string): Promise<Peer> {
  const peer = await connect(url, credential);
  peer.send(hello(hostId));
  await peer.next("welcome");
  return peer;
}

async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 3000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

let t: TestApp | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

type AppOptions = NonNullable<Parameters<typeof createTestApp>[0]>;

async function start(agentHub: AppOptions["agentHub"] = {}, channels?: AppOptions["channels"]) {
  t = await createTestApp({
    runOperations: false,
    agentHub: { presence: { flushDelayMs: 5 }, ...agentHub },
    ...(channels ? { channels } : {}),
  });
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = t.app.server.address() as AddressInfo;
  return { t, base: `http://127.0.0.1:${port}`, url: `ws://127.0.0.1:${port}${AGENT_LINK_PATH}` };
}

async function mintJoinToken(app: TestApp, projectId = app.projectId): Promise<string> {
  const res = await app.request({
    method: "POST",
    url: `/v1/projects/${projectId}/joinTokens`,
    payload: {},
    token: ADMIN_TOKEN,
  });
  expect(res.statusCode).toBe(201);
  return res.json().token;
}

async function register(app: TestApp, hostname = "worker-1") {
  const joinToken = await mintJoinToken(app);
  const res = await app.request({
    method: "POST",
    url: "/v1/agents/register",
    payload: { joinToken, hostname },
    token: null,
  });
  expect(res.statusCode).toBe(201);
  return res.json() as { hostId: string; credential: string; projectId: string };
}

const nodeRow = async (app: TestApp, id: string) => firstRow(await app.db.select().from(nodes).where(eq(nodes.id, id)));

describe("POST /v1/agents/register", () => {
  it("spends the join token and creates an unattached node in the local pool, storing only the credential hash", async () => {
    const { t } = await start();
    const joinToken = await mintJoinToken(t);
    const res = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken, hostname: "worker-7", primaryIp: "10.0.0.7", agentVersion: "0.1.0" },
      token: null,
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toEqual({
      hostId: expect.any(String),
      credential: expect.stringMatching(/^khc_/),
      projectId: t.projectId,
    });
    const row = await nodeRow(t, body.hostId);
    expect(row).toMatchObject({
      projectId: t.projectId,
      name: "worker-7",
      primaryIp: "10.0.0.7",
      clusterId: null,
      agentConnected: 0,
    });
    expect(row?.credentialHash).toBe(hashSecret(body.credential));
    const pool = firstRow(
      await t.db
        .select()
        .from(nodePools)
        .where(eq(nodePools.id, row?.nodePoolId as string)),
    );
    expect(pool?.projectId).toBe(t.projectId);
    const tokenRow = firstRow(
      await t.db
        .select()
        .from(joinTokens)
        .where(eq(joinTokens.tokenHash, hashSecret(joinToken))),
    );
    expect(tokenRow).toMatchObject({ usedByNodeId: body.hostId, usedAt: expect.any(String) });
  });

  it("refuses a used, an expired and an unknown join token with distinct clear messages", async () => {
    const { t } = await start();
    const joinToken = await mintJoinToken(t);
    const first = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken, hostname: "a" },
      token: null,
    });
    expect(first.statusCode).toBe(201);
    const again = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken, hostname: "b" },
      token: null,
    });
    expect(again.statusCode).toBe(403);
    expect(again.json()).toMatchObject({
      code: "join_token_used",
      message: expect.stringContaining("already been used"),
    });

    const expired = await mintJoinToken(t);
    await t.db
      .update(joinTokens)
      .set({ expiresAt: "2000-01-01T00:00:00.000Z" })
      .where(eq(joinTokens.tokenHash, hashSecret(expired)));
    const late = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken: expired, hostname: "c" },
      token: null,
    });
    expect(late.statusCode).toBe(403);
    expect(late.json()).toMatchObject({ code: "join_token_expired", message: expect.stringContaining("expired") });

    const unknown = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken: "kjt_nope", hostname: "d" },
      token: null,
    });
    expect(unknown.statusCode).toBe(403);
    expect(unknown.json().code).toBe("join_token_unknown");
    expect(await t.db.select().from(nodes)).toHaveLength(1);
  });

  it("a registration whose answer was lost is asked again with the agent's credential: the same host, once", async () => {
    const { t, base } = await start();
    const joinToken = await mintJoinToken(t);
    const stateDir = mkdtempSync(join(tmpdir(), "keelson-reg-"));
    // The real agent registration, over real HTTP; the first answer is lost after the
    // control plane committed it (as when the connection drops on the way back).
    let calls = 0;
    const losingFetch: typeof fetch = async (input, init) => {
      const answer = await fetch(input, init);
      calls += 1;
      if (calls === 1) throw new TypeError("socket hang up");
      return answer;
    };
    const identity = await ensureRegistered({
      controlPlane: base,
      stateDir,
      joinToken,
      hostname: "lost-answer",
      fetch: losingFetch,
      backoff: { initialMs: 5, maxMs: 10 },
    });
    expect(calls).toBe(2);
    const rows = await t.db.select().from(nodes).where(eq(nodes.name, "lost-answer"));
    expect(rows).toHaveLength(1);
    expect(rows[0]?.id).toBe(identity.hostId);
    expect(rows[0]?.credentialHash).toBe(hashSecret(identity.credential));
    expect(existsSync(join(stateDir, PENDING_REGISTRATION_FILE))).toBe(false);

    // The spent token with another credential, or none, is still refused.
    for (const extra of [{ credential: `khc_${"A".repeat(43)}` }, {}]) {
      const other = await t.request({
        method: "POST",
        url: "/v1/agents/register",
        payload: { joinToken, hostname: "intruder", ...extra },
        token: null,
      });
      expect(other.statusCode).toBe(403);
      expect(other.json().code).toBe("join_token_used");
    }
    const weak = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken: await mintJoinToken(t), hostname: "weak", credential: "khc_short" },
      token: null,
    });
    expect(weak.statusCode).toBe(400);
    expect(weak.json()).toMatchObject({ field: "credential" });
    rmSync(stateDir, { recursive: true, force: true });
  });

  it("answers 400 naming the field for a bad body and does not spend the token", async () => {
    const { t } = await start();
    const joinToken = await mintJoinToken(t);
    for (const [payload, field] of [
      [{ joinToken, hostname: "bad host!" }, "hostname"],
      [{ joinToken }, "hostname"],
      [{ joinToken, hostname: "ok", extra: 1 }, "extra"],
      [{ hostname: "x" }, "joinToken"],
    ] as const) {
      const res = await t.request({ method: "POST", url: "/v1/agents/register", payload, token: null });
      expect(res.statusCode).toBe(400);
      expect(res.json().field, JSON.stringify(payload)).toBe(field);
    }
    const ok = await t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken, hostname: "ok" },
      token: null,
    });
    expect(ok.statusCode).toBe(201);
  });
});

describe("agent hub", () => {
  it("refuses the upgrade with 401 for a missing, unknown or mismatched credential", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    for (const [cred, opts, code] of [
      [undefined, {}, "credential_missing"],
      ["khc_wrong", {}, "credential_unknown"],
      [credential, { hostId: "someone-else" }, "host_mismatch"],
    ] as const) {
      const err = await connect(url, cred, opts).then(
        () => undefined,
        (e: { status?: number; body?: string }) => e,
      );
      expect(err?.status).toBe(401);
      expect(JSON.parse(err?.body ?? "{}")).toMatchObject({ code, message: expect.stringMatching(/credential/) });
    }
    expect(t.app.keelson.agents.isConnected(hostId)).toBe(false);
  });

  it("answers a hello with welcome and records the host as connected; the close marks it gone", async () => {
    const { t, url } = await start({ heartbeatMs: 5000 });
    const { hostId, credential, projectId } = await register(t);
    const peer = await connect(url, credential, { hostId });
    peer.send(
      hello(hostId, {
        hostname: "renamed-host",
        primaryIp: "10.9.9.9",
        agentVersion: "0.3.0",
        agentError: "last upgrade failed",
      }),
    );
    expect(await peer.next("welcome")).toEqual({
      type: "welcome",
      protocolVersion: PROTOCOL_VERSION,
      hostId,
      projectId,
      heartbeatMs: 5000,
    });
    const row = await waitFor("node row", async () => {
      const r = await nodeRow(t, hostId);
      return r?.agentConnected === 1 ? r : undefined;
    });
    expect(row).toMatchObject({
      name: "renamed-host",
      primaryIp: "10.9.9.9",
      agentVersion: "0.3.0",
      agentStatus: "running",
      agentError: "last upgrade failed",
      status: "ok",
      lastSeen: expect.any(String),
    });
    expect(row.facts).toMatchObject({ hostname: "worker-1", cpu: { count: 2 } });
    expect(t.app.keelson.agents.isConnected(hostId)).toBe(true);

    peer.send({ type: "status", agentStatus: "updating", agentVersion: "0.3.0" });
    await waitFor("status update", async () => (await nodeRow(t, hostId))?.agentStatus === "updating");
    expect((await nodeRow(t, hostId))?.agentError).toBeNull();

    peer.ws.close(1000);
    await waitFor("disconnect", async () => (await nodeRow(t, hostId))?.agentConnected === 0);
    expect(t.app.keelson.agents.isConnected(hostId)).toBe(false);
  });

  it.each([
    ["garbage", "{not json", CloseCode.BAD_FRAME],
    ["an unknown type", { type: "shout" }, CloseCode.BAD_FRAME],
    ["a frame before hello", { type: "status", agentStatus: "running", agentVersion: "1" }, CloseCode.BAD_FRAME],
    ["a hello missing its facts", { ...hello("x"), facts: undefined }, CloseCode.BAD_FRAME],
    ["a hello of another protocol version", { type: "hello", protocolVersion: 999 }, CloseCode.PROTOCOL_MISMATCH],
  ])("closes the link on %s", async (_name, frame, code) => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const peer = await connect(url, credential);
    peer.send(frame);
    const closed = await peer.closed;
    expect(closed.code).toBe(code);
    expect(closed.reason.length).toBeGreaterThan(5);
    expect(t.app.keelson.agents.isConnected(hostId)).toBe(false);
  });

  it("closes with BAD_FRAME on a bad frame after hello, and UNAUTHORIZED on a hello naming another host", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const peer = await linked(url, credential, hostId);
    peer.send({ type: "facts", facts: { ...facts("x"), cpu: { model: "x", count: -1 } } });
    expect((await peer.closed).code).toBe(CloseCode.BAD_FRAME);

    const liar = await connect(url, credential);
    liar.send(hello("another-host"));
    expect((await liar.closed).code).toBe(CloseCode.UNAUTHORIZED);
  });

  it("closes a connection that sends no hello in time", async () => {
    const { t, url } = await start({ helloTimeoutMs: 100 });
    const { credential } = await register(t);
    const peer = await connect(url, credential);
    expect((await peer.closed).code).toBe(CloseCode.HELLO_TIMEOUT);
  });

  it("replaces the old session on reconnect; the old socket's late close does not remove the new one", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const first = await linked(url, credential, hostId);
    const second = await connect(url, credential);
    second.send(hello(hostId, { agentVersion: "0.2.0" }));
    await second.next("welcome");
    const old = await first.closed;
    expect(old.code).toBe(CloseCode.SUPERSEDED);
    // Give the server time to process the old socket's close completely.
    await new Promise((r) => setTimeout(r, 50));
    await t.app.keelson.agents.flushPresence();
    expect(t.app.keelson.agents.isConnected(hostId)).toBe(true);
    expect(await nodeRow(t, hostId)).toMatchObject({ agentConnected: 1, agentVersion: "0.2.0" });
    // And the new session still works end to end.
    const reply = t.app.keelson.agents.sendCommand(hostId, "ping", {});
    const command = await second.next("command");
    second.send({ type: "result", id: command.id, ok: true, result: { at: "now" } });
    await expect(reply).resolves.toEqual({ at: "now" });
  });

  it("terminates a peer that stops answering pings, and keeps one that answers", async () => {
    const { t, url } = await start({ heartbeatMs: 60 });
    const silent = await register(t, "silent");
    const lively = await register(t, "lively");
    const mute = await connect(url, silent.credential, { autoPong: false });
    mute.send(hello(silent.hostId));
    await mute.next("welcome");
    const good = await linked(url, lively.credential, lively.hostId);
    const closed = await mute.closed;
    // Terminated (no close frame): 1006 on the client side.
    expect(closed.code).toBe(1006);
    await waitFor("silent host marked gone", async () => (await nodeRow(t, silent.hostId))?.agentConnected === 0);
    expect(t.app.keelson.agents.isConnected(lively.hostId)).toBe(true);
    expect(good.ws.readyState).toBe(WebSocket.OPEN);
  });

  it("relays commands and settles each id once: result, agent failure, bad result, timeout, offline", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const agents = t.app.keelson.agents;
    await expect(agents.sendCommand(hostId, "ping", {})).rejects.toBeInstanceOf(HostOfflineError);
    const peer = await linked(url, credential, hostId);

    const ok = agents.sendCommand(hostId, "ping", {}, { timeoutMs: 2000 });
    const c1 = await peer.next("command");
    expect(c1).toMatchObject({ name: "ping", payload: {}, timeoutMs: 2000 });
    peer.send({ type: "result", id: c1.id, ok: true, result: { at: "t1" } });
    // A duplicate result is ignored, not an error and not a second settlement.
    peer.send({ type: "result", id: c1.id, ok: false, error: { code: "FAILED", message: "dup" } });
    await expect(ok).resolves.toEqual({ at: "t1" });

    const failed = agents.sendCommand(hostId, "agent.upgrade", {
      name: "keelson-agent",
      version: "9",
      url: "file:///x",
    });
    const c2 = await peer.next("command");
    peer.send({ type: "result", id: c2.id, ok: false, error: { code: "FAILED", message: "disk full" } });
    const err = await failed.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandFailedError);
    expect((err as CommandFailedError).agentCode).toBe("FAILED");
    expect((err as Error).message).toContain("disk full");

    const bad = agents.sendCommand(hostId, "ping", {});
    const c3 = await peer.next("command");
    peer.send({ type: "result", id: c3.id, ok: true, result: { at: 42 } });
    await expect(bad).rejects.toMatchObject({ agentCode: "BAD_RESULT" });

    const slow = agents.sendCommand(hostId, "ping", {}, { timeoutMs: 50 });
    const c4 = await peer.next("command");
    await expect(slow).rejects.toBeInstanceOf(CommandTimeoutError);
    // The late answer changes nothing and does not close the link.
    peer.send({ type: "result", id: c4.id, ok: true, result: { at: "late" } });
    await new Promise((r) => setTimeout(r, 30));
    expect(agents.isConnected(hostId)).toBe(true);
  });

  it("sends each issue of a command once, however many wake-ups or joins of its id ask for it", async () => {
    // The app's own channels, so the test can give the wake-ups another replica's issue or a
    // resubscription's catch-up would.
    const channels = inProcessChannels();
    const { t, url } = await start({}, channels);
    const { hostId, credential } = await register(t);
    const agents = t.app.keelson.agents;
    const peer = await linked(url, credential, hostId);
    const reply = agents.sendCommand(hostId, "ping", {}, { id: "once", timeoutMs: 10_000 });
    expect((await peer.next("command")).id).toBe("once");
    for (let i = 0; i < 3; i++) await channels.notify("commands", `${hostId} once`);
    // A step retried after a database outage issues its stable id again: it joins the wait.
    const joined = agents.sendCommand(hostId, "ping", {}, { id: "once", timeoutMs: 10_000 });
    const marker = agents.sendCommand(hostId, "ping", {}, { id: "marker", timeoutMs: 10_000 });
    expect((await peer.next("command")).id).toBe("marker");
    await new Promise((r) => setTimeout(r, 100));
    expect(peer.frames.filter((f) => f.type === "command")).toEqual([]);
    peer.send({ type: "result", id: "once", ok: true, result: { at: "t1" } });
    peer.send({ type: "result", id: "marker", ok: true, result: { at: "t2" } });
    await expect(reply).resolves.toEqual({ at: "t1" });
    await expect(joined).resolves.toEqual({ at: "t1" });
    await expect(marker).resolves.toEqual({ at: "t2" });
  });

  it("sends a command issued again (its answer lost, or timed out) again on the same link; the agent's answer settles it", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const agents = t.app.keelson.agents;
    const peer = await linked(url, credential, hostId);
    const first = agents.sendCommand(hostId, "ping", {}, { id: "again", timeoutMs: 100 });
    expect((await peer.next("command")).id).toBe("again");
    await expect(first).rejects.toBeInstanceOf(CommandTimeoutError);
    // A step retried issues its stable id again: the agent must hear it again (it answers a
    // repeated id from its record).
    const second = agents.sendCommand(hostId, "ping", {}, { id: "again", timeoutMs: 10_000 });
    expect((await peer.next("command")).id).toBe("again");
    peer.send({ type: "result", id: "again", ok: true, result: { at: "from the record" } });
    await expect(second).resolves.toEqual({ at: "from the record" });
  });

  it("re-delivers an unanswered command with the same id after the host reconnects", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const first = await linked(url, credential, hostId);
    const reply = t.app.keelson.agents.sendCommand(hostId, "ping", {}, { timeoutMs: 5000 });
    const sent = await first.next("command");
    first.ws.terminate();
    await waitFor("disconnect", () => !t.app.keelson.agents.isConnected(hostId));
    const second = await linked(url, credential, hostId);
    const again = await second.next("command");
    expect(again).toEqual(sent);
    second.send({ type: "result", id: again.id, ok: true, result: { at: "from the record" } });
    await expect(reply).resolves.toEqual({ at: "from the record" });
  });

  it("answers token.verify for the host's project, the admin token, and nothing else", async () => {
    const { t, url } = await start();
    const { hostId, credential } = await register(t);
    const peer = await linked(url, credential, hostId);
    const cases = [
      [t.token, true],
      [ADMIN_TOKEN, true],
      [t.otherToken, false],
      ["kpt_made_up", false],
    ] as const;
    for (const [i, [token, valid]] of cases.entries()) {
      peer.send({ type: "token.verify", id: `v${i}`, token });
      expect(await peer.next("token.verified")).toEqual({ type: "token.verified", id: `v${i}`, valid });
    }
  });

  it("drains on close: going-away to every agent, hosts marked disconnected, no new links", async () => {
    const { t: app, url } = await start();
    const a = await register(app, "a");
    const b = await register(app, "b");
    const pa = await linked(url, a.credential, a.hostId);
    const pb = await linked(url, b.credential, b.hostId);
    const pending = app.app.keelson.agents
      .sendCommand(a.hostId, "ping", {}, { timeoutMs: 10_000 })
      .catch((e: unknown) => e);
    await pa.next("command");
    t = undefined;
    await app.app.close();
    expect((await pa.closed).code).toBe(CloseCode.GOING_AWAY);
    expect((await pb.closed).code).toBe(CloseCode.GOING_AWAY);
    expect(await pending).toBeInstanceOf(HostOfflineError);
    expect((await nodeRow(app, a.hostId))?.agentConnected).toBe(0);
    expect((await nodeRow(app, b.hostId))?.agentConnected).toBe(0);
    // The listener is gone with the app: nothing answers on the port any more.
    await expect(connect(url, a.credential)).rejects.toThrow(/ECONNREFUSED/);
    await app.close();
  });

  it("marks hosts left connected by a crashed control plane as disconnected on start", async () => {
    const first = await createTestApp({ runOperations: false });
    const { hostId } = await register(first);
    await first.db.update(nodes).set({ agentConnected: 1 }).where(eq(nodes.id, hostId));
    await first.close(true);
    t = await createTestApp({ runOperations: false, dataDir: first.dataDir });
    expect((await nodeRow(t, hostId))?.agentConnected).toBe(0);
  });
});

describe("SessionRegistry (stale-socket guard)", () => {
  it("lets only the current session of a host remove itself", () => {
    const registry = new SessionRegistry<{ hostId: string; n: number }>();
    const old = { hostId: "h", n: 1 };
    const fresh = { hostId: "h", n: 2 };
    expect(registry.replace(old)).toBeUndefined();
    expect(registry.replace(fresh)).toBe(old);
    // The old socket's late close arrives now: it must not unregister the new session.
    expect(registry.removeIfCurrent(old)).toBe(false);
    expect(registry.get("h")).toBe(fresh);
    expect(registry.removeIfCurrent(fresh)).toBe(true);
    expect(registry.get("h")).toBeUndefined();
    expect(registry.replace(fresh)).toBeUndefined();
    expect(registry.replace(fresh)).toBeUndefined();
  });
});

describe("PresenceWriter", () => {
  const at = (iso: string) => Date.parse(iso);
  /** `lastSeen` of each host, as the node list and the host record show it. */
  async function shown(app: TestApp, hostIds: string[]): Promise<{ node: unknown; host: unknown }[]> {
    const list = (await app.request({ url: `/v4/${app.projectId}/nodes` })).json<
      { uuid: string; lastSeen: unknown }[]
    >();
    return Promise.all(
      hostIds.map(async (id) => ({
        node: list.find((n) => n.uuid === id)?.lastSeen,
        host: (await app.request({ url: `/v1/hosts/${id}` })).json<{ info: { last_response_time: unknown } }>().info
          .last_response_time,
      })),
    );
  }

  it("keeps heartbeats in memory and writes them in one statement to host_presence, not rewriting the hosts' rows", async () => {
    const { t } = await start();
    const hosts = await Promise.all([register(t, "p1"), register(t, "p2"), register(t, "p3")]);
    const ids = hosts.map((h) => h.hostId);
    const writer = new PresenceWriter(t.db, t.app.log, { seenIntervalMs: 60_000, flushDelayMs: 60_000 });
    for (const id of ids) writer.touch(id, at("2030-01-01T00:00:00.400Z"));
    // Hosts unknown here (deleted meanwhile) get no row, but count towards one statement.
    for (let i = 0; i < 1200; i++) writer.touch(`unknown-${i}`, at("2030-01-01T00:00:00.400Z"));
    // Nothing written until the periodic flush.
    expect(await t.db.select().from(hostPresence)).toEqual([]);
    const rowsBefore = await t.db.select().from(nodes).where(inArray(nodes.id, ids));
    const statements = t.store.statements();
    await writer.flush();
    // A transaction around one upsert of 1,203 hosts and the first flush's sweep of deleted hosts' rows.
    expect(t.store.statements() - statements).toBeLessThanOrEqual(4);
    expect(
      (await t.db.select().from(hostPresence).where(inArray(hostPresence.hostId, ids))).map((r) => r.lastSeen),
    ).toEqual(["2030-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z", "2030-01-01T00:00:00.000Z"]);
    expect(await t.db.select().from(nodes).where(inArray(nodes.id, ids))).toEqual(rowsBefore);
    // Not connected: the host record names the time too, and both read the heartbeat.
    expect(await shown(t, ids)).toEqual(
      ids.map(() => ({ node: "2030-01-01T00:00:00.000Z", host: "2030-01-01T00:00:00.000Z" })),
    );
    // After close (the database may be closing) events are ignored.
    await writer.close();
    writer.touch(ids[0] as string, at("2030-01-01T00:05:00.000Z"));
    await writer.flush();
    expect((await shown(t, [ids[0] as string]))[0]?.node).toBe("2030-01-01T00:00:00.000Z");
  });

  it("writes the hosts' state changes in one statement per set of columns, each host its own values", async () => {
    const { t } = await start();
    const hosts = await Promise.all(["s1", "s2", "s3", "s4", "s5", "s6"].map((name) => register(t, name)));
    const ids = hosts.map((h) => h.hostId);
    const writer = new PresenceWriter(t.db, t.app.log, { seenIntervalMs: 60_000, flushDelayMs: 60_000 });
    try {
      const [before] = await t.db
        .select()
        .from(nodes)
        .where(eq(nodes.id, ids[5] as string));
      // Three shapes: a status change, a disconnect, and a disconnect given an undefined column
      // (which sets nothing, as drizzle's set() takes it).
      for (const [i, id] of ids.slice(0, 3).entries())
        writer.change(id, {
          agentStatus: `status-${i}`,
          agentError: i === 0 ? null : `error-${i}`,
          agentVersion: `1.0.${i}`,
        });
      for (const [i, id] of ids.slice(3).entries())
        writer.change(id, { agentConnected: 0, lastSeen: `2030-01-01T00:00:0${i}.000Z` });
      writer.change(ids[5] as string, { agentError: undefined });
      const statements = t.store.statements();
      await writer.flush();
      // A transaction (and on PostgreSQL the rows' locks) around two UPDATEs: one per set of columns.
      expect(t.store.statements() - statements).toBeLessThanOrEqual(5);
      const rows = await t.db.select().from(nodes).where(inArray(nodes.id, ids));
      const row = (id: string | undefined) => rows.find((r) => r.id === id);
      for (const [i, id] of ids.slice(0, 3).entries())
        expect(row(id)).toMatchObject({
          agentStatus: `status-${i}`,
          agentError: i === 0 ? null : `error-${i}`,
          agentVersion: `1.0.${i}`,
        });
      for (const [i, id] of ids.slice(3).entries())
        expect(row(id)).toMatchObject({ agentConnected: 0, lastSeen: `2030-01-01T00:00:0${i}.000Z` });
      expect(row(ids[5])?.agentError).toBe(before?.agentError);
    } finally {
      await writer.close();
    }
  });

  it("shows the later of a host's row and its heartbeats; a late heartbeat never takes the time back", async () => {
    const { t } = await start();
    const [a, b] = await Promise.all([register(t, "a"), register(t, "b")]);
    const ids = [a?.hostId, b?.hostId] as string[];
    const writer = new PresenceWriter(t.db, t.app.log, { seenIntervalMs: 60_000, flushDelayMs: 60_000 });
    try {
      for (const id of ids) writer.touch(id, at("2030-01-01T00:01:00.000Z"));
      await writer.flush();
      // a disconnected later (its row's time), b's row holds an earlier connect.
      await t.db
        .update(nodes)
        .set({ lastSeen: "2030-01-01T00:02:00.000Z" })
        .where(eq(nodes.id, ids[0] as string));
      await t.db
        .update(nodes)
        .set({ lastSeen: "2030-01-01T00:00:30.000Z" })
        .where(eq(nodes.id, ids[1] as string));
      expect((await shown(t, ids)).map((s) => s.node)).toEqual([
        "2030-01-01T00:02:00.000Z",
        "2030-01-01T00:01:00.000Z",
      ]);
      // The replica b's link left flushes late, with an older heartbeat.
      writer.touch(ids[1] as string, at("2030-01-01T00:00:50.000Z"));
      await writer.flush();
      expect((await shown(t, [ids[1] as string]))[0]?.node).toBe("2030-01-01T00:01:00.000Z");
    } finally {
      await writer.close();
    }
  });

  it("writes no heartbeat for a host deleted meanwhile, and sweeps the rows of deleted hosts", async () => {
    const { t } = await start();
    const [kept, gone] = await Promise.all([register(t, "kept"), register(t, "gone")]);
    const keptId = kept?.hostId as string;
    const goneId = gone?.hostId as string;
    // A heartbeat row left by a host deleted earlier (no foreign key removes it).
    await t.db.insert(hostPresence).values({ hostId: "deleted-host", lastSeen: "2030-01-01T00:00:00.000Z" });
    const writer = new PresenceWriter(t.db, t.app.log, { seenIntervalMs: 60_000, flushDelayMs: 60_000 });
    try {
      writer.touch(keptId, at("2030-01-01T00:01:00.000Z"));
      writer.touch(goneId, at("2030-01-01T00:01:00.000Z"));
      await t.db.delete(nodes).where(eq(nodes.id, goneId));
      await writer.flush();
      expect((await t.db.select().from(hostPresence)).map((r) => r.hostId)).toEqual([keptId]);
    } finally {
      await writer.close();
    }
  });
});

describe("POST /v1/agents/ping", () => {
  it("pings every connected host of a project and reports round trips; admin only", async () => {
    const { t, url } = await start();
    const a = await register(t, "a");
    const b = await register(t, "b");
    const peers = await Promise.all(
      [a, b].map(async (h, i) => {
        const peer = await linked(url, h.credential, h.hostId);
        // Host a answers, host b fails.
        peer.ws.on("message", (data) => {
          const frame = JSON.parse(String(data));
          if (frame.type !== "command") return;
          peer.send(
            i === 0
              ? { type: "result", id: frame.id, ok: true, result: { at: "now" } }
              : { type: "result", id: frame.id, ok: false, error: { code: "FAILED", message: "sim" } },
          );
        });
        return peer;
      }),
    );
    const denied = await t.request({ method: "POST", url: "/v1/agents/ping", payload: {} });
    expect(denied.statusCode).toBe(403);
    const res = await t.request({
      method: "POST",
      url: "/v1/agents/ping",
      payload: { projectId: t.projectId },
      token: ADMIN_TOKEN,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      hosts: 2,
      ok: 1,
      failed: 1,
      timedOut: 0,
      offline: 0,
      latencyMs: { min: expect.any(Number) },
    });
    const other = await t.request({
      method: "POST",
      url: "/v1/agents/ping",
      payload: { projectId: t.otherProjectId },
      token: ADMIN_TOKEN,
    });
    expect(other.json()).toMatchObject({ hosts: 0, ok: 0, latencyMs: null });
    const bad = await t.request({
      method: "POST",
      url: "/v1/agents/ping",
      payload: { timeoutMs: 0 },
      token: ADMIN_TOKEN,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().field).toBe("timeoutMs");
    for (const p of peers) p.ws.close();
  });
});

describe("simulated fleet (test/sim) against the real hub", () => {
  it("registers, connects and answers commands with the configured failure rate", async () => {
    const { startSimulator } = await import("../../../test/sim/index.ts");
    const { t, base } = await start();
    let n = 0;
    // Deterministic "random": every 4th command fails.
    const sim = await startSimulator({
      url: base,
      adminToken: ADMIN_TOKEN,
      projectId: t.projectId,
      count: 12,
      latencyMs: 5,
      failureRate: 0.25,
      random: () => (n++ % 4 === 0 ? 0 : 0.99),
    });
    try {
      expect(sim.connectedCount()).toBe(12);
      expect(t.app.keelson.agents.connectedHosts(t.projectId)).toHaveLength(12);
      await waitFor(
        "rows",
        async () => (await t.db.select().from(nodes).where(eq(nodes.agentConnected, 1))).length === 12,
      );
      const names = (await t.db.select({ name: nodes.name }).from(nodes)).map((r) => r.name).sort();
      expect(names[0]).toBe("sim-00001");
      const res = await t.request({ method: "POST", url: "/v1/agents/ping", payload: {}, token: ADMIN_TOKEN });
      expect(res.json()).toMatchObject({ hosts: 12, ok: 9, failed: 3, timedOut: 0 });
      expect(res.json().latencyMs.min).toBeGreaterThanOrEqual(4);
      // Killed agents reconnect by themselves, with the same identity.
      sim.agents[0]?.kill();
      await waitFor("reconnect", () => (sim.agents[0]?.connects ?? 0) >= 2, 5000);
      expect(await t.db.select().from(nodes)).toHaveLength(12);
    } finally {
      await sim.stop();
    }
    await waitFor("all gone", () => t.app.keelson.agents.connectedCount === 0);
  });
});
