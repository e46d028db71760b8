import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../../control-plane/test/helpers.ts";
import { auditTime } from "../src/commands/audit.ts";
import { cliEnv, keelson } from "./run-cli.ts";

/** `keelson audit` through the real binary against a control plane listening on loopback. */
vi.setConfig({ testTimeout: 120_000 });

const LOGIN = "/keystone/v3/auth/tokens";
const JOIN_TOKENS = "/v1/projects/:projectId/joinTokens";

let t: TestApp;
let base: string;
let dir: string;
const joinTokenIds: string[] = [];

interface AuditRow {
  route: string;
  method: string;
  status: number | null;
  target: string | null;
  projectId: string | null;
  credential: string | null;
}

beforeAll(async () => {
  t = await createTestApp();
  base = await t.app.listen({ host: "127.0.0.1", port: 0 });
  for (let i = 0; i < 3; i++) {
    const minted = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
    expect(minted.statusCode, minted.body).toBe(201);
    joinTokenIds.push(minted.json().id);
  }
  const refused = await t.request({
    method: "POST",
    url: LOGIN,
    token: null,
    payload: {
      auth: {
        identity: { methods: ["password"], password: { user: { name: "nobody", password: "not-a-password-1" } } },
        scope: { project: { name: "default" } },
      },
    },
  });
  expect(refused.statusCode).toBe(401);
  dir = mkdtempSync(join(tmpdir(), "keelson-cli-audit-"));
}, 60_000);
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = (token: string) => cliEnv(base, dir, token);

async function json(args: string[], token = ADMIN_TOKEN): Promise<AuditRow[]> {
  const res = await keelson(["audit", ...args, "-o", "json"], { env: env(token) });
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout);
}

describe("keelson audit", () => {
  it("lists the last day's records oldest first: a table for people, JSON for scripts", async () => {
    const records = await json([]);
    const minted = records.filter((r) => r.route === JOIN_TOKENS && r.method === "POST");
    expect(minted.map((r) => [r.status, r.target, r.credential !== null])).toEqual(
      joinTokenIds.map((id) => [201, id, true]),
    );
    expect(records.find((r) => r.route === LOGIN)).toMatchObject({ method: "POST", status: 401 });

    const table = await keelson(["audit"], { env: env(ADMIN_TOKEN) });
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^AT\s+WHO\s+PROJECT\s+SOURCE\s+REQUEST\s+TARGET\s+STATUS\s+ISSUED\s+OPERATION$/);
    expect(lines).toHaveLength(records.length + 1);
    expect(lines.find((l) => l.includes(`POST ${LOGIN}`))).toMatch(/\s401\s/);
    expect(lines.find((l) => l.includes(joinTokenIds[0] as string))).toMatch(/^\S+\s+token \S+\s+\S+\s+127\.0\.0\.1\s/);
  });

  it("filters by target and time; --limit reads no further and says so", async () => {
    const one = await json(["--target", joinTokenIds[1] as string]);
    expect(one.map((r) => r.target)).toEqual([joinTokenIds[1]]);
    expect(await json(["--since", "2999-01-01T00:00:00Z"])).toEqual([]);
    expect((await json(["--since", "10m"])).length).toBeGreaterThanOrEqual(4);
    expect(await json(["--until", "30d"])).toEqual([]);

    const limited = await keelson(["audit", "--limit", "2", "-o", "json"], { env: env(ADMIN_TOKEN) });
    expect(limited.code, limited.stderr).toBe(0);
    expect(JSON.parse(limited.stdout)).toHaveLength(2);
    expect(limited.stderr).toContain("showing the first 2 records of the window");
  });

  it("--jsonl streams the API's export: one record per line, the same as -o json", async () => {
    const res = await keelson(["audit", "--jsonl"], { env: env(ADMIN_TOKEN) });
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trimEnd().split("\n");
    expect(lines.map((l) => JSON.parse(l))).toEqual(await json([]));
  });

  it("refuses a bad time or limit before asking (exit 2); another project's records are 403 (exit 3)", async () => {
    const bad = await keelson(["audit", "--since", "yesterday"], { env: env(ADMIN_TOKEN) });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--since yesterday: must be an ISO-8601 time");
    const limit = await keelson(["audit", "--limit", "0"], { env: env(ADMIN_TOKEN) });
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain("--limit must be a whole number from 1 to 100000");

    // A project admin sees its own project's records (the refused login has no project).
    const own = await json([], t.token);
    expect(own.length).toBeGreaterThanOrEqual(3);
    expect(new Set(own.map((r) => r.projectId))).toEqual(new Set([t.projectId]));
    // The global --project filters: the admin sees the project's records, not the refused login.
    const named = await json(["--project", t.projectId]);
    expect(named.map((r) => r.target)).toEqual(own.map((r) => r.target));
    const other = await keelson(["audit", "--project", t.otherProjectId], { env: env(t.token) });
    expect(other.code).toBe(3);
    expect(other.stderr).toContain("403");
  });

  it("reads ages and ISO-8601 times as the API expects them", () => {
    const now = Date.parse("2026-11-26T12:00:00.000Z");
    expect(auditTime("--since", "90s", now)).toBe("2026-11-26T11:58:30.000Z");
    expect(auditTime("--since", "6h", now)).toBe("2026-11-26T06:00:00.000Z");
    expect(auditTime("--since", "7d", now)).toBe("2026-11-19T12:00:00.000Z");
    expect(auditTime("--until", "2026-11-01T08:00:00+01:00", now)).toBe("2026-11-01T07:00:00.000Z");
    expect(() => auditTime("--since", "6 hours", now)).toThrow("--since 6 hours: must be");
    expect(() => auditTime("--since", "2026-13-45", now)).toThrow("must be");
  });
});
