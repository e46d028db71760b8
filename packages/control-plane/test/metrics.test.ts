import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { operations } from "@keelson/db";
import { SettingsError } from "@keelson/settings";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rolloutProgress } from "../src/metrics/scrape-gauges.ts";
import { readScrapeToken } from "../src/metrics/scrape-token.ts";
import { ADMIN_TOKEN, createTestApp } from "./helpers.ts";
import { type Fleet, m, startFleet, w } from "./membership-harness.ts";
import { parseScrape, samples, sampleValue } from "./prometheus-text.ts";

describe("GET /metrics against what happened", () => {
  let f: Fleet;
  beforeAll(async () => {
    f = await startFleet(3, { namePrefix: "met", phaseTimeMs: 20 });
  });
  afterAll(() => f.close());

  const scrape = async () => {
    const res = await f.t.request({ method: "GET", url: "/metrics", token: ADMIN_TOKEN });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    return { text: res.body, parsed: parseScrape(res.body) };
  };

  it("counts the agents connected, the attach's commands, its duration and the nodes' phases", async () => {
    const clusterId = await f.createCluster("met-one");
    const res = await f.attach(clusterId, [m(f.id(0)), w(f.id(1)), w(f.id(2))]);
    expect(res.statusCode, res.body).toBe(200);
    await f.idle();
    await f.t.app.keelson.agents.flushPresence();
    const { parsed, text } = await scrape();

    expect(sampleValue(parsed, "keelson_agent_links_open")).toBe(3);
    expect(sampleValue(parsed, "keelson_agent_link_connects_total")).toBe(3);
    expect(sampleValue(parsed, "keelson_agent_link_disconnects_total")).toBe(0);
    expect(sampleValue(parsed, "keelson_hosts", { agent: "connected" })).toBe(3);
    expect(sampleValue(parsed, "keelson_hosts", { agent: "disconnected" })).toBe(0);
    // This replica's series carry its id; the whole service's (the same on every replica) none.
    const replica = f.t.settings.replicaId;
    for (const name of ["keelson_agent_links_open", "keelson_agent_link_connects_total", "process_cpu_seconds_total"]) {
      expect(samples(parsed, name).map((s) => s.labels.replica)).toEqual([replica]);
    }
    for (const name of ["keelson_hosts", "keelson_operations", "keelson_rollout_nodes", "keelson_rollout_nodes_done"]) {
      const found = samples(parsed, name);
      expect(found.length).toBeGreaterThan(0);
      for (const s of found) expect(s.labels.replica).toBeUndefined();
    }

    const joins = f.sent.filter((c) => c.name === "node.join").length;
    expect(joins).toBe(3);
    expect(sampleValue(parsed, "keelson_agent_commands_sent_total", { command: "node.join" })).toBe(joins);
    expect(
      sampleValue(parsed, "keelson_agent_command_duration_seconds_count", {
        command: "node.join",
        outcome: "succeeded",
      }),
    ).toBe(joins);
    expect(parsed.families.get("keelson_agent_command_duration_seconds")?.type).toBe("HISTOGRAM");

    // The attach's duration as the database records it (from its start to its end).
    const op = await f.latestOperation(clusterId);
    expect(op.state).toBe("succeeded");
    const recorded = (Date.parse(op.finishedAt as string) - Date.parse(op.startedAt as string)) / 1000;
    const finished = { kind: op.kind, state: "succeeded" };
    expect(sampleValue(parsed, "keelson_operation_duration_seconds_count", finished)).toBe(1);
    expect(Math.abs(sampleValue(parsed, "keelson_operation_duration_seconds_sum", finished) - recorded)).toBeLessThan(
      0.005,
    );

    const succeeded = await f.t.db.select().from(operations).where(eq(operations.state, "succeeded"));
    const ofKind = succeeded.filter((o) => o.kind === op.kind).length;
    expect(sampleValue(parsed, "keelson_operations", { kind: op.kind, state: "succeeded" })).toBe(ofKind);

    // Each node ran gen-certs once: one observation per node, not one per report.
    expect(sampleValue(parsed, "keelson_node_phase_duration_seconds_count", { phase: "gen-certs" })).toBe(3);
    expect(samples(parsed, "keelson_node_phase_failures_total")).toEqual([]);
    expect(parsed.families.get("keelson_node_phase_failures_total")?.type).toBe("COUNTER");

    // Routes by pattern, never by URL: no id of this test appears in any label.
    expect(
      samples(parsed, "keelson_http_request_duration_seconds_count", {
        route: "/v4/:project_uuid/clusters/:uuid/attach",
        method: "POST",
        status_code: "200",
      }),
    ).toHaveLength(1);
    for (const id of [clusterId, f.t.projectId, f.id(0), op.id]) expect(text).not.toContain(id);

    expect(sampleValue(parsed, "keelson_database_up")).toBe(1);
    expect(sampleValue(parsed, "keelson_storage_full")).toBe(0);
    expect(parsed.families.get("nodejs_eventloop_lag_seconds")?.type).toBe("GAUGE");
  });

  it("counts a dropped link and its reconnect", async () => {
    const before = sampleValue((await scrape()).parsed, "keelson_agent_link_reconnects_total");
    const agent = f.agent(2);
    agent.kill();
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + 10_000;
      const poll = async () => {
        const { parsed } = await scrape();
        if (sampleValue(parsed, "keelson_agent_link_reconnects_total") > before) return resolve();
        if (Date.now() > deadline) return reject(new Error("no reconnect counted"));
        setTimeout(poll, 50);
      };
      void poll();
    });
    const { parsed } = await scrape();
    expect(sampleValue(parsed, "keelson_agent_link_reconnects_total")).toBe(before + 1);
    expect(sampleValue(parsed, "keelson_agent_link_disconnects_total")).toBe(1);
    expect(sampleValue(parsed, "keelson_agent_link_connects_total")).toBe(4);
  });
});

describe("who may scrape", () => {
  const SCRAPE_TOKEN = "scrape-token-of-the-test-0123456789";

  it("takes the scrape token as a bearer or in X-Auth-Token, and the admin token; 401 without, 403 for others", async () => {
    const t = await createTestApp({ scrapeToken: SCRAPE_TOKEN });
    const get = (headers: Record<string, string>) =>
      t.request({ method: "GET", url: "/metrics", token: null, headers });
    expect((await get({ authorization: `Bearer ${SCRAPE_TOKEN}` })).statusCode).toBe(200);
    expect((await get({ "x-auth-token": SCRAPE_TOKEN })).statusCode).toBe(200);
    expect((await get({ "x-auth-token": ADMIN_TOKEN })).statusCode).toBe(200);

    const none = await get({});
    expect(none.statusCode).toBe(401);
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer/);
    expect(none.json()).toMatchObject({ code: "unauthorized", message: expect.stringMatching(/scrape token/) });
    const refused: Record<string, string>[] = [
      { authorization: `Bearer ${SCRAPE_TOKEN}x` },
      { "x-auth-token": t.token }, // a project admin's token
    ];
    for (const headers of refused) {
      const res = await get(headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(403);
      expect(res.json()).toMatchObject({ code: "forbidden", message: expect.stringMatching(/scrape token/) });
    }
    // Basic is not a way in: no token was sent as far as the route is concerned.
    const basic = await get({ authorization: `Basic ${Buffer.from(`x:${SCRAPE_TOKEN}`).toString("base64")}` });
    expect(basic.statusCode).toBe(401);
    // The scrape token opens /metrics only.
    const clusters = await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters`, token: SCRAPE_TOKEN });
    expect(clusters.statusCode).toBe(403);
  });

  it("reads the scrape token file's first line; refuses a missing file and a short token", () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-scrape-"));
    try {
      const file = join(dir, "token");
      writeFileSync(file, `${SCRAPE_TOKEN}\nignored\n`);
      expect(readScrapeToken({ metricsTokenFile: file })).toBe(SCRAPE_TOKEN);
      expect(readScrapeToken({})).toBeUndefined();
      writeFileSync(file, "short\n");
      expect(() => readScrapeToken({ metricsTokenFile: file })).toThrow(SettingsError);
      expect(() => readScrapeToken({ metricsTokenFile: join(dir, "absent") })).toThrow(
        /KEELSON_METRICS_TOKEN_FILE: no file/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("rollout progress from a saved cursor", () => {
  const params = {
    masters: [{ id: "m1" }, { id: "m2" }],
    chosen: [{ id: "c1" }],
    workers: [{ id: "w1" }, { id: "w2" }],
  };
  it("counts the lists behind the current step and the current step's done nodes", () => {
    expect(rolloutProgress({ params, cursor: null })).toEqual({ done: 0, total: 5 });
    expect(rolloutProgress({ params, cursor: { step: 0, stepName: "prefetch", progress: {} } })).toEqual({
      done: 0,
      total: 5,
    });
    expect(
      rolloutProgress({ params, cursor: { step: 1, stepName: "upgrade-masters", progress: { done: ["m1"] } } }),
    ).toEqual({ done: 1, total: 5 });
    expect(
      rolloutProgress({ params, cursor: { step: 2, stepName: "upgrade-chosen-workers", progress: { done: [] } } }),
    ).toEqual({ done: 2, total: 5 });
    expect(
      rolloutProgress({ params, cursor: { step: 3, stepName: "upgrade-workers", progress: { done: ["w2"] } } }),
    ).toEqual({ done: 4, total: 5 });
    expect(rolloutProgress({ params, cursor: { step: 4, stepName: "finish", progress: {} } })).toEqual({
      done: 5,
      total: 5,
    });
  });
});
