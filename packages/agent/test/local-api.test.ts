import {
  buildHostRecord,
  HostFacts,
  HostRecord,
  type NodePhaseStatus,
  type PhaseStatusRecord,
  UpgradeRequestError,
  validateUpgradeRequest,
} from "@keelson/protocol";
import pino from "pino";
import { Compile } from "typebox/compile";
import { afterEach, describe, expect, it } from "vitest";
import { AgentMetrics } from "../src/local-api/metrics.ts";
import { buildLocalApi } from "../src/local-api/server.ts";
import { TokenCheck } from "../src/local-api/token-check.ts";
import { UpgradeBusyError } from "../src/upgrade/upgrader.ts";

const HOST_ID = "3f0e4c2a-1111-4222-8333-944445555666";
const LOCAL = "kla_local-token";
const PROJECT = "kpt_project-token";
const log = pino({ level: "silent" });
const recordValidator = Compile(HostRecord);

const facts = {
  hostname: "host-a",
  os: {
    platform: "linux",
    family: "debian",
    distro: "Debian GNU/Linux",
    release: "12",
    codename: "bookworm",
    kernel: "6.1.0",
  },
  arch: "x64",
  cpu: { model: "Example CPU", count: 2 },
  memory: { totalBytes: 4294967296 },
  disks: [{ name: "/dev/vda", type: "SSD", sizeBytes: 1 }],
  interfaces: [
    { name: "eth0", mac: "02:00:00:00:00:01", addresses: ["fe80::1", "10.0.0.5"] },
    { name: "eth1", mac: "02:00:00:00:00:02", addresses: ["fd00::2"] },
  ],
  primaryIp: "10.0.0.5",
  agentVersion: "1.0.0",
};

describe("host record", () => {
  it("has the shape existing clients read, plus Keelson's fields", () => {
    const record = buildHostRecord({
      id: HOST_ID,
      facts,
      responding: true,
      lastSeen: "2030-01-01T00:00:00.000Z",
      agentVersion: "1.0.0",
      agentStatus: "running",
      nodeStatus: "ok",
      clusterUuid: null,
    });
    expect(recordValidator.Check(record)).toBe(true);
    expect(record).toEqual({
      id: HOST_ID,
      info: {
        hostname: "host-a",
        arch: "x86_64",
        os_family: "Linux",
        os_info: "Debian GNU/Linux 12 bookworm",
        responding: true,
        last_response_time: null,
      },
      roles: [],
      role_status: "ok",
      message: "",
      host_agent: { version: "1.0.0", status: "running" },
      extensions: { interfaces: { status: "ok", data: { iface_ip: { eth0: "10.0.0.5" }, primary_ip: "10.0.0.5" } } },
      facts,
      nodeStatus: "ok",
      clusterUuid: null,
      phases: [],
      conditions: [],
    });
  });

  it("shows the conditions the agent reported with its facts (a full state dir)", () => {
    const full = {
      code: "state_dir_full" as const,
      message: "the agent's state dir /var/lib/keelson-agent is full",
      since: "2030-01-01T00:00:00.000Z",
    };
    const withCondition = { ...facts, conditions: [full] };
    expect(Compile(HostFacts).Check(withCondition)).toBe(true);
    expect(Compile(HostFacts).Check({ ...facts, conditions: [{ ...full, code: "disk_on_fire" }] })).toBe(false);
    const record = buildHostRecord({
      id: HOST_ID,
      facts: withCondition,
      responding: true,
      agentVersion: "1.0.0",
      agentStatus: "running",
    });
    expect(recordValidator.Check(record)).toBe(true);
    expect(record.conditions).toEqual([full]);
    // Read back leniently from the database: a malformed entry is left out, not passed on.
    const odd = buildHostRecord({
      id: HOST_ID,
      facts: { conditions: [{ code: 1 }] },
      responding: true,
      agentVersion: "1.0.0",
      agentStatus: "running",
    });
    expect(odd.conditions).toEqual([]);
  });

  it("shows when the agent was last heard from while it is away, and the last error", () => {
    const record = buildHostRecord({
      id: HOST_ID,
      facts: null,
      hostname: "fallback",
      primaryIp: "10.0.0.9",
      responding: false,
      lastSeen: "2030-01-01T00:00:00.000Z",
      agentVersion: "1.0.0",
      agentStatus: "running",
      agentError: "upgrade to 2.0.0 failed: checksum mismatch",
    });
    expect(recordValidator.Check(record)).toBe(true);
    expect(record.info).toMatchObject({
      hostname: "fallback",
      responding: false,
      last_response_time: "2030-01-01T00:00:00.000Z",
    });
    expect(record.message).toBe("upgrade to 2.0.0 failed: checksum mismatch");
    expect(record.host_agent.error).toBe(record.message);
    expect(record.extensions.interfaces.data.primary_ip).toBe("10.0.0.9");
  });
});

describe("token check", () => {
  it("accepts the local token without asking anyone", async () => {
    const check = new TokenCheck({ localToken: LOCAL, verify: () => Promise.reject(new Error("must not be called")) });
    expect(await check.check(LOCAL)).toEqual({ ok: true, via: "local" });
  });

  it("asks the control plane about other tokens and caches the answer briefly", async () => {
    let now = 0;
    const asked: string[] = [];
    const check = new TokenCheck({
      localToken: LOCAL,
      verify: async (token) => {
        asked.push(token);
        return token === PROJECT;
      },
      validTtlMs: 30_000,
      invalidTtlMs: 5_000,
      now: () => now,
    });
    expect(await check.check(PROJECT)).toEqual({ ok: true, via: "project" });
    expect(await check.check(PROJECT)).toEqual({ ok: true, via: "project" });
    expect(asked).toEqual([PROJECT]);
    now = 30_001;
    await check.check(PROJECT);
    expect(asked).toEqual([PROJECT, PROJECT]);

    expect((await check.check("nope")).ok).toBe(false);
    expect((await check.check("nope")).ok).toBe(false);
    expect(asked.filter((t) => t === "nope")).toHaveLength(1);
    now += 5_001;
    await check.check("nope");
    expect(asked.filter((t) => t === "nope")).toHaveLength(2);
  });

  it("refuses a token it cannot verify while the link is down, and does not cache that", async () => {
    let linkUp = false;
    const check = new TokenCheck({
      localToken: LOCAL,
      verify: async (token) => {
        if (!linkUp) throw new Error("not connected");
        return token === PROJECT;
      },
    });
    const verdict = await check.check(PROJECT);
    expect(verdict.ok).toBe(false);
    expect(verdict.ok === false && verdict.reason).toMatch(/cannot be reached/);
    linkUp = true;
    expect(await check.check(PROJECT)).toEqual({ ok: true, via: "project" });
    expect((await check.check(undefined)).ok).toBe(false);
  });
});

describe("local API", () => {
  let app: ReturnType<typeof buildLocalApi> | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  let node: { nodeStatus: NodePhaseStatus; phases: PhaseStatusRecord[]; clusterId: string | null } = {
    nodeStatus: "ok",
    phases: [],
    clusterId: null,
  };
  let metrics = new AgentMetrics(() => node);
  function build(upgrade: (body: unknown) => { accepted: boolean; status: "running" | "updating" }) {
    const record = buildHostRecord({
      id: HOST_ID,
      facts,
      responding: true,
      agentVersion: "1.0.0",
      agentStatus: "running",
    });
    app = buildLocalApi({
      hostId: HOST_ID,
      tokens: new TokenCheck({ localToken: LOCAL, verify: async (t) => t === PROJECT }),
      hostRecord: () => record,
      upgrade,
      log,
      metrics,
    });
    return app;
  }
  const accept = (body: unknown) => {
    validateUpgradeRequest(body);
    return { accepted: true, status: "updating" as const };
  };

  it("serves the host record to the local token and to a project token", async () => {
    const api = build(accept);
    for (const token of [LOCAL, PROJECT]) {
      const res = await api.inject({ url: `/v1/hosts/${HOST_ID}`, headers: { "x-auth-token": token } });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(recordValidator.Check(body)).toBe(true);
      expect(body.id).toBe(HOST_ID);
      expect(body.host_agent).toEqual({ version: "1.0.0", status: "running" });
    }
    const compat = await api.inject({ url: `/resmgr/v1/hosts/${HOST_ID}`, headers: { "x-auth-token": LOCAL } });
    expect(compat.statusCode).toBe(200);
  });

  it("answers 403 with a JSON error without a valid token, before telling whether a host exists", async () => {
    const api = build(accept);
    for (const headers of [{}, { "x-auth-token": "wrong" }]) {
      for (const url of [`/v1/hosts/${HOST_ID}`, "/v1/hosts/another"]) {
        const res = await api.inject({ url, headers });
        expect(res.statusCode).toBe(403);
        expect(res.json()).toMatchObject({ code: "forbidden" });
      }
    }
    const put = await api.inject({ method: "PUT", url: `/v1/hosts/${HOST_ID}/hostagent`, payload: {} });
    expect(put.statusCode).toBe(403);
  });

  it("serves its metrics to the same tokens: link state and reconnects, phase states, service restarts", async () => {
    metrics = new AgentMetrics(() => node);
    const api = build(accept);
    expect((await api.inject({ url: "/metrics", headers: { "x-auth-token": "wrong" } })).statusCode).toBe(403);
    const restarts = new Map([["kubelet", 2]]);
    const asked: string[] = [];
    const services = metrics.watch({
      kind: "direct",
      install: async () => true,
      start: async () => undefined,
      restart: async (name) => {
        asked.push(name);
      },
      stop: async () => undefined,
      uninstall: async () => undefined,
      status: async (name) => ({ name, state: "running", pid: 1, detail: "", restarts: restarts.get(name) ?? 0 }),
      waitHealthy: async (name) => ({ name, state: "running", pid: 1, detail: "", restarts: 0 }),
      close: () => undefined,
    });
    await services.install({ name: "kubelet" } as Parameters<typeof services.install>[0]);
    await services.restart("kubelet");
    expect(asked).toEqual(["kubelet"]);
    metrics.linkConnected();
    metrics.linkDisconnected();
    metrics.linkConnected();
    const phase = (id: string, state: PhaseStatusRecord["state"]) =>
      ({
        id,
        state,
        name: id,
        order: 1,
        lastError: null,
        startedAt: null,
        finishedAt: null,
        durationMs: null,
      }) as PhaseStatusRecord;
    node = {
      nodeStatus: "converging",
      clusterId: HOST_ID,
      phases: [phase("gen-certs", "running"), phase("start-kubelet", "failed")],
    };

    const res = await api.inject({ url: "/metrics", headers: { "x-auth-token": LOCAL } });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    const lines = res.body.split("\n");
    for (const line of [
      "keelson_agent_link_up 1",
      "keelson_agent_link_reconnects_total 1",
      'keelson_agent_node_phase{phase="gen-certs",state="running"} 1',
      'keelson_agent_node_phase{phase="gen-certs",state="failed"} 0',
      'keelson_agent_node_phase{phase="start-kubelet",state="failed"} 1',
      'keelson_agent_node_status{status="converging"} 1',
      'keelson_agent_node_status{status="ok"} 0',
      'keelson_agent_service_restarts{service="kubelet"} 2',
      'keelson_agent_service_restarts_requested_total{service="kubelet"} 1',
    ]) {
      expect(lines, line).toContain(line);
    }
    node = { nodeStatus: "ok", phases: [], clusterId: null };
  });

  it("answers 404 for another host's uuid", async () => {
    const api = build(accept);
    const res = await api.inject({ url: "/v1/hosts/another-uuid", headers: { "x-auth-token": LOCAL } });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: "not_found" });
    const put = await api.inject({
      method: "PUT",
      url: "/v1/hosts/another-uuid/hostagent",
      headers: { "x-auth-token": LOCAL },
      payload: { name: "keelson-agent", version: "2.0.0", url: "file:///x.tar.gz" },
    });
    expect(put.statusCode).toBe(404);
  });

  it("starts an upgrade with 200 and refuses malformed bodies with 400 naming the field", async () => {
    const started: unknown[] = [];
    const api = build((body) => {
      started.push(validateUpgradeRequest(body));
      return { accepted: true, status: "updating" };
    });
    const put = (payload: unknown) =>
      api.inject({
        method: "PUT",
        url: `/v1/hosts/${HOST_ID}/hostagent`,
        headers: { "x-auth-token": LOCAL },
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
    const ok = await put({ name: "keelson-agent", version: "2.0.0", url: "https://example.test/a.tar.gz" });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ accepted: true, status: "updating" });

    const cases: [unknown, string][] = [
      [{ version: "2.0.0", url: "file:///a" }, "name"],
      [{ name: "k", url: "file:///a" }, "version"],
      [{ name: "k", version: "../../etc", url: "file:///a" }, "version"],
      [{ name: "k", version: "2.0.0" }, "url"],
      [{ name: "k", version: "2.0.0", url: "ftp://host/a" }, "url"],
      [{ name: "k", version: "2.0.0", url: "not a url" }, "url"],
      [{ name: "k", version: 2, url: "file:///a" }, "version"],
      [{ name: "k", version: "2.0.0", url: "file:///a", sha256: "abc" }, "sha256"],
      [[1, 2], "body"],
      [undefined, "body"],
    ];
    for (const [payload, field] of cases) {
      const res = await put(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toMatchObject({ field });
      expect(res.json().message).toContain(field);
    }
    expect(started).toHaveLength(1);
  });

  it("answers 409 while an upgrade is in progress and 400 on unparsable JSON", async () => {
    const api = build(() => {
      throw new UpgradeBusyError("an upgrade of this host agent is already in progress");
    });
    const busy = await api.inject({
      method: "PUT",
      url: `/v1/hosts/${HOST_ID}/hostagent`,
      headers: { "x-auth-token": LOCAL },
      payload: { name: "k", version: "2.0.0", url: "file:///a" },
    });
    expect(busy.statusCode).toBe(409);
    const bad = await api.inject({
      method: "PUT",
      url: `/v1/hosts/${HOST_ID}/hostagent`,
      headers: { "x-auth-token": LOCAL, "content-type": "application/json" },
      payload: "{not json",
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ field: "body" });
  });

  it("refuses a request whose text is not well-formed Unicode, naming the field", async () => {
    const api = build(accept);
    const res = await api.inject({
      method: "PUT",
      url: `/v1/hosts/${HOST_ID}/hostagent`,
      headers: { "x-auth-token": LOCAL, "content-type": "application/json" },
      payload: '{"name":"keelson-agent","version":"1.0.0\\ud800","url":"file:///a"}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      code: "invalid_field",
      message: "version: must be valid Unicode text (it holds an unpaired surrogate)",
      field: "version",
    });
  });

  it("validates requests the same way for the link", () => {
    expect(() => validateUpgradeRequest({ name: "k", version: "1", url: "gopher://x" })).toThrow(UpgradeRequestError);
    expect(validateUpgradeRequest({ name: " k ", version: "1.0.0", url: "file:///a", sha256: "A".repeat(64) })).toEqual(
      { name: "k", version: "1.0.0", url: "file:///a", sha256: "a".repeat(64) },
    );
  });
});
