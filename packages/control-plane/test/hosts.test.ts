import { HostRecord } from "@keelson/protocol";
import { Compile } from "typebox/compile";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CommandFailedError, HostOfflineError } from "../src/agents/errors.ts";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "./helpers.ts";
import { insertHost, sampleFacts } from "./node-fixtures.ts";

const recordValidator = Compile(HostRecord);

describe("/v1/hosts", () => {
  let t: TestApp;
  let online: string;
  let away: string;
  let failed: string;
  let foreign: string;

  beforeAll(async () => {
    t = await createTestApp({ runOperations: false });
    online = (
      await insertHost(t.db, t.projectId, {
        name: "host-a",
        primaryIp: "10.0.0.11",
        facts: sampleFacts("host-a", "10.0.0.11"),
        agentConnected: 1,
        lastSeen: "2030-01-01T00:00:00.000Z",
        agentVersion: "0.1.0",
        createdAt: "2030-01-01T00:00:01.000Z",
      })
    ).id;
    away = (
      await insertHost(t.db, t.projectId, {
        name: "host-b",
        facts: sampleFacts("host-b", "10.0.0.12"),
        agentConnected: 0,
        lastSeen: "2030-01-02T03:04:05.000Z",
        createdAt: "2030-01-01T00:00:02.000Z",
      })
    ).id;
    failed = (
      await insertHost(t.db, t.projectId, {
        name: "host-c",
        agentConnected: 1,
        agentStatus: "running",
        agentError: "upgrade to 0.2.0 failed: checksum mismatch",
        createdAt: "2030-01-01T00:00:03.000Z",
      })
    ).id;
    foreign = (await insertHost(t.db, t.otherProjectId, { name: "elsewhere" })).id;
  });
  afterAll(() => t.close());
  afterEach(() => vi.restoreAllMocks());

  it("lists the host records of the caller's project; the admin sees every project", async () => {
    const res = await t.request({ url: "/v1/hosts" });
    expect(res.statusCode).toBe(200);
    const list = res.json() as HostRecord[];
    expect(list.map((h) => h.id)).toEqual([online, away, failed]);
    for (const record of list) expect(recordValidator.Check(record)).toBe(true);
    const admin = (await t.request({ url: "/v1/hosts", token: ADMIN_TOKEN })).json() as HostRecord[];
    expect(admin.map((h) => h.id)).toEqual(expect.arrayContaining([online, away, failed, foreign]));
    const other = (await t.request({ url: "/v1/hosts", token: t.otherToken })).json() as HostRecord[];
    expect(other.map((h) => h.id)).toEqual([foreign]);
  });

  it("reads a host from its last report: responding, or away since when", async () => {
    const up = (await t.request({ url: `/v1/hosts/${online}` })).json() as HostRecord;
    expect(up).toMatchObject({
      id: online,
      info: { hostname: "host-a", arch: "x86_64", os_family: "Linux", responding: true, last_response_time: null },
      host_agent: { version: "0.1.0", status: "running" },
      extensions: { interfaces: { data: { iface_ip: { eth0: "10.0.0.11" } } } },
      nodeStatus: "ok",
      clusterUuid: null,
      phases: [],
    });
    expect(up.facts).toMatchObject({ hostname: "host-a", cpu: { count: 2 } });
    const down = (await t.request({ url: `/resmgr/v1/hosts/${away}` })).json() as HostRecord;
    expect(down.info).toMatchObject({ responding: false, last_response_time: "2030-01-02T03:04:05.000Z" });
    const broken = (await t.request({ url: `/v1/hosts/${failed}` })).json() as HostRecord;
    expect(broken.message).toBe("upgrade to 0.2.0 failed: checksum mismatch");
    expect(broken.host_agent.error).toBe(broken.message);
  });

  it("answers 404 for an unknown host or another project's, 403 without a token", async () => {
    for (const id of [foreign, "00000000-0000-0000-0000-000000000000"]) {
      const res = await t.request({ url: `/v1/hosts/${id}` });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: "not_found" });
    }
    expect((await t.request({ url: `/v1/hosts/${foreign}`, token: ADMIN_TOKEN })).statusCode).toBe(200);
    for (const token of [null, "bogus"]) {
      expect((await t.request({ url: "/v1/hosts", token })).statusCode).toBe(403);
      expect((await t.request({ url: `/v1/hosts/${online}`, token })).statusCode).toBe(403);
    }
  });

  describe("PUT /v1/hosts/{uuid}/hostagent", () => {
    const body = { name: "keelson-agent", version: "0.2.0", url: "http://packages.test/keelson-agent-0.2.0.tar.gz" };
    const put = (id: string, payload: unknown, token?: string) =>
      t.request({
        method: "PUT",
        url: `/v1/hosts/${id}/hostagent`,
        payload: payload as object,
        ...(token ? { token } : {}),
      });

    it("relays the upgrade to the connected agent and answers with its acknowledgement", async () => {
      const hub = t.app.keelson.agents;
      vi.spyOn(hub, "isConnected").mockImplementation((id) => id === online);
      const send = vi.spyOn(hub, "sendCommand").mockResolvedValue({ accepted: true, status: "updating" });
      const res = await put(online, { ...body, sha256: "A".repeat(64) });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ accepted: true, status: "updating" });
      expect(send).toHaveBeenCalledWith(
        online,
        "agent.upgrade",
        { ...body, sha256: "a".repeat(64) },
        expect.objectContaining({ timeoutMs: expect.any(Number) }),
      );
      const compat = await t.request({ method: "PUT", url: `/resmgr/v1/hosts/${online}/hostagent`, payload: body });
      expect(compat.statusCode).toBe(200);
    });

    it("answers 409 with a clear message when the host's agent is offline", async () => {
      const send = vi.spyOn(t.app.keelson.agents, "sendCommand");
      const res = await put(away, body);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: "host_offline" });
      expect(res.json().message).toMatch(/offline/);
      expect(send).not.toHaveBeenCalled();
    });

    it("passes the hub's verdicts on: offline at send time 409, agent refusal 502", async () => {
      const hub = t.app.keelson.agents;
      vi.spyOn(hub, "isConnected").mockReturnValue(true);
      vi.spyOn(hub, "sendCommand").mockRejectedValueOnce(new HostOfflineError(online));
      expect((await put(online, body)).statusCode).toBe(409);
      vi.spyOn(hub, "sendCommand").mockRejectedValueOnce(
        new CommandFailedError(online, "agent.upgrade", "FAILED", "busy"),
      );
      const refused = await put(online, body);
      expect(refused.statusCode).toBe(502);
      expect(refused.json().message).toMatch(/busy/);
    });

    it("refuses malformed bodies with 400 naming the field, without relaying", async () => {
      const hub = t.app.keelson.agents;
      vi.spyOn(hub, "isConnected").mockReturnValue(true);
      const send = vi.spyOn(hub, "sendCommand");
      const cases: [unknown, string][] = [
        [{ version: "0.2.0", url: body.url }, "name"],
        [{ name: "k", url: body.url }, "version"],
        [{ name: "k", version: "../etc", url: body.url }, "version"],
        [{ name: "k", version: "0.2.0" }, "url"],
        [{ name: "k", version: "0.2.0", url: "ftp://x/y" }, "url"],
        [{ ...body, sha256: "nothex" }, "sha256"],
        [{ ...body, extra: 1 }, "extra"],
      ];
      for (const [payload, field] of cases) {
        const res = await put(online, payload);
        expect(res.statusCode, JSON.stringify(payload)).toBe(400);
        expect(res.json()).toMatchObject({ field });
      }
      expect(send).not.toHaveBeenCalled();
    });

    it("answers 404 for a host the caller cannot see, 403 without a token", async () => {
      vi.spyOn(t.app.keelson.agents, "isConnected").mockReturnValue(true);
      expect((await put(foreign, body)).statusCode).toBe(404);
      const res = await t.request({ method: "PUT", url: `/v1/hosts/${online}/hostagent`, payload: body, token: null });
      expect(res.statusCode).toBe(403);
    });
  });
});
