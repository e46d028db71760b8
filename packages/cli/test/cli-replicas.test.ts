import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../../control-plane/test/helpers.ts";
import { databaseTime, dialectOf, replicas } from "../../db/src/index.ts";
import { cliEnv, keelson } from "./run-cli.ts";

/** `keelson replicas` through the real binary against a control plane listening on loopback. */
vi.setConfig({ testTimeout: 120_000 });

let t: TestApp;
let base: string;
let dir: string;

beforeAll(async () => {
  t = await createTestApp({ runOperations: true, settings: { replicaId: "cp-1" } });
  base = await t.app.listen({ host: "127.0.0.1", port: 0 });
  // A replica that crashed a minute ago: still listed, not live.
  const ago = (ms: number) => databaseTime(dialectOf(t.db), -ms);
  await t.db.insert(replicas).values({
    id: "cp-0",
    url: "https://10.0.0.9:8443",
    version: "0.0.9",
    host: "elsewhere.example",
    pid: 4242,
    startedAt: ago(3_600_000),
    heartbeatAt: ago(60_000),
    agentsHeld: 7,
  });
  dir = mkdtempSync(join(tmpdir(), "keelson-cli-replicas-"));
}, 60_000);
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = (token: string) => cliEnv(base, dir, token);

describe("keelson replicas", () => {
  it("lists every replica as a table (live or gone, heartbeat age, agents, operations) and as JSON", async () => {
    const table = await keelson(["replicas"], { env: env(ADMIN_TOKEN) });
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^CURRENT\s+ID\s+URL\s+VERSION\s+STATUS\s+HEARTBEAT\s+STARTED\s+AGENTS\s+OPERATIONS$/);
    expect(lines[1]).toMatch(/^-\s+cp-0\s+https:\/\/10\.0\.0\.9:8443\s+0\.0\.9\s+gone\s+1m\d\ds ago\s+\S+\s+7\s+0$/);
    // Its URL is the one its settings name (the test app listens elsewhere).
    expect(lines[2]).toMatch(/^\*\s+cp-1\s+http:\/\/127\.0\.0\.1:\d+\s+\S+\s+live\s+\d+\.\ds ago\s+\S+\s+0\s+0$/);
    expect(lines).toHaveLength(3);

    const json = await keelson(["replicas", "-o", "json"], { env: env(ADMIN_TOKEN) });
    expect(json.code, json.stderr).toBe(0);
    expect(
      JSON.parse(json.stdout).map((r: { id: string; live: boolean; self: boolean }) => [r.id, r.live, r.self]),
    ).toEqual([
      ["cp-0", false, false],
      ["cp-1", true, true],
    ]);
  });

  it("a project token is refused (403, exit 3), nothing listed", async () => {
    const res = await keelson(["replicas"], { env: env(t.token) });
    expect(res.code).toBe(3);
    expect(res.stderr).toContain("403");
    expect(res.stdout).toBe("");
  });

  it("drain: 404 and 409 are exit 1 naming the refusal; --no-wait returns once marked; the wait ends when the replica holds nothing", async () => {
    const unknown = await keelson(["replicas", "drain", "cp-nope"], { env: env(ADMIN_TOKEN) });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("404 not_found: replica cp-nope does not exist");
    const gone = await keelson(["replicas", "drain", "cp-0"], { env: env(ADMIN_TOKEN) });
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("409 replica_gone");
    const last = await keelson(["replicas", "drain", "cp-1"], { env: env(ADMIN_TOKEN) });
    expect(last.code).toBe(1);
    expect(last.stderr).toContain("409 last_replica");
    const usage = await keelson(["replicas", "drain", "cp-1", "--timeout", "0"], { env: env(ADMIN_TOKEN) });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--timeout must be");

    // Another live replica (a row heartbeating now) takes cp-1's work over.
    const now = databaseTime(dialectOf(t.db));
    await t.db.insert(replicas).values({
      id: "cp-2",
      url: "https://10.0.0.10:8443",
      version: "0.0.9",
      host: "elsewhere.example",
      pid: 4243,
      startedAt: now,
      heartbeatAt: now,
    });
    const marked = await keelson(["replicas", "drain", "cp-1", "--no-wait"], { env: env(ADMIN_TOKEN) });
    expect(marked.code, marked.stderr).toBe(0);
    expect(marked.stderr).toMatch(/^cp-1: draining \(0 operations, 0 agent links\)$/m);
    expect(marked.stdout).toBe("");
    const waited = await keelson(["replicas", "drain", "cp-1", "--timeout", "30"], { env: env(ADMIN_TOKEN) });
    expect(waited.code, waited.stderr).toBe(0);
    expect(waited.stdout.trim()).toBe("cp-1: drained, it holds no operation and no agent link");
    const table = await keelson(["replicas"], { env: env(ADMIN_TOKEN) });
    expect(table.stdout).toMatch(/^\*\s+cp-1\s+\S+\s+\S+\s+draining\s/m);
    expect((await t.request({ method: "GET", url: "/readyz", token: null })).json()).toEqual({ status: "draining" });
  });
});
