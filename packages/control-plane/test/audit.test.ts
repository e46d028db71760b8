import { auditEvents, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneAuditRecords } from "../src/audit/records.ts";
import { ADMIN_TOKEN, mintProjectToken } from "./helpers.ts";
import { type Fleet, m, startFleet, waitFor } from "./membership-harness.ts";

/**
 * The audit trail (issue 16): a cluster create, an attach, a failed login and a kubeconfig
 * download are recorded with who, where from, the route, the target and the outcome, and no
 * secret of any of them lands in the table.
 */

const LOGIN = "/keystone/v3/auth/tokens";
const PASSWORD = "audit-password-1";
const WRONG = "wrong-password-9";

function authBody(user: string, password: string) {
  return {
    auth: {
      identity: { methods: ["password"], password: { user: { name: user, password } } },
      scope: { project: { name: "default" } },
    },
  };
}

type Row = typeof auditEvents.$inferSelect;

describe("the audit trail", () => {
  let f: Fleet;
  const secrets: string[] = [];
  let clusterId: string;
  let all: Row[];
  const rows = async () => await f.t.db.select().from(auditEvents);

  beforeAll(async () => {
    f = await startFleet(2, { namePrefix: "aud" });
    const t = f.t;
    secrets.push(ADMIN_TOKEN, t.token, PASSWORD, WRONG);
    const user = await t.request({
      method: "POST",
      url: `/v1/projects/${t.projectId}/users`,
      payload: { name: "auditor", password: PASSWORD },
    });
    expect(user.statusCode).toBe(201);
    const session = await t.request({
      method: "POST",
      url: LOGIN,
      token: null,
      payload: authBody("auditor", PASSWORD),
    });
    expect(session.statusCode).toBe(201);
    secrets.push(session.headers["x-subject-token"] as string);
    const failed = await t.request({ method: "POST", url: LOGIN, token: null, payload: authBody("auditor", WRONG) });
    expect(failed.statusCode).toBe(401);

    const minted = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/tokens`, payload: {} });
    secrets.push(minted.json().token);
    const join = await t.request({ method: "POST", url: `/v1/projects/${t.projectId}/joinTokens`, payload: {} });
    secrets.push(join.json().token);

    clusterId = await f.createCluster("audited");
    const attached = await f.attach(clusterId, [m(f.id(0))]);
    expect(attached.statusCode, attached.body).toBe(200);
    await f.idle();
    const kubeconfig = await t.request({ method: "GET", url: `/v4/${t.projectId}/kubeconfig/${clusterId}` });
    expect(kubeconfig.statusCode, kubeconfig.body).toBe(200);
    for (const match of kubeconfig.body.matchAll(/(?:token|client-key-data): (\S+)/g)) secrets.push(match[1] as string);
    expect(secrets.length).toBeGreaterThan(7);
    // The answer's facts land just after the answer is sent (onResponse): wait for the last ones.
    await waitFor("every answer recorded", async () => (await rows()).every((r) => r.status !== null));
    all = await rows();
  }, 60_000);
  afterAll(async () => f?.close());

  const find = (method: string, route: string, target?: string) =>
    all.filter((r) => r.method === method && r.route === route && (target === undefined || r.target === target));

  it("records the cluster create with its operation, in the create's transaction", async () => {
    const [create] = find("POST", "/v4/:projectId/clusters", clusterId);
    const operation = (await f.t.db.select().from(operations).where(eq(operations.targetId, clusterId)))[0];
    expect(create).toMatchObject({
      actor: "token",
      projectId: f.t.projectId,
      source: "127.0.0.1",
      status: 200,
      operationId: operation?.id,
    });
    expect(create?.tokenId).toEqual(expect.any(String));
  });

  it("records the attach, the kubeconfig download as a credential issued, and the join token", () => {
    expect(find("POST", "/v4/:project_uuid/clusters/:uuid/attach", clusterId)).toEqual([
      expect.objectContaining({ status: 200, projectId: f.t.projectId, operationId: expect.any(String) }),
    ]);
    expect(find("GET", "/v4/:project_uuid/kubeconfig/:cluster_uuid", clusterId)).toEqual([
      expect.objectContaining({ status: 200, credential: "kubeconfig", actor: "token" }),
    ]);
    expect(find("POST", "/v1/projects/:projectId/joinTokens").some((r) => r.credential === "join token")).toBe(true);
    // Plain reads are not recorded.
    expect(all.filter((r) => r.method === "GET" && r.credential === null)).toEqual([]);
  });

  it("records the login that succeeded (who, the session it opened) and the one refused", () => {
    const logins = find("POST", LOGIN);
    const ok = logins.find((r) => r.status === 201);
    const refused = logins.find((r) => r.status === 401);
    expect(ok).toMatchObject({ actor: "session", credential: "session token", projectId: f.t.projectId });
    expect(ok?.userId).toEqual(expect.any(String));
    expect(refused).toMatchObject({ actor: "anonymous", userId: null, credential: null, target: "default/auditor" });
  });

  it("holds no token, password, key or credential anywhere in the table", async () => {
    const dump = JSON.stringify(await rows());
    for (const secret of secrets) expect(dump).not.toContain(secret);
  });

  it("serves the records to the global admin and a project admin, filtered and paginated", async () => {
    const t = f.t;
    const page = await t.request({ method: "GET", url: `/v1/audit?target=${clusterId}`, token: ADMIN_TOKEN });
    expect(page.statusCode).toBe(200);
    expect(page.json().records.map((r: Row) => r.route)).toEqual(
      expect.arrayContaining(["/v4/:projectId/clusters", "/v4/:project_uuid/clusters/:uuid/attach"]),
    );

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `&cursor=${cursor}` : "";
      const res = await t.request({ method: "GET", url: `/v1/audit?limit=2${query}`, token: ADMIN_TOKEN });
      expect(res.json().records.length).toBeLessThanOrEqual(2);
      seen.push(...res.json().records.map((r: Row) => r.id));
      cursor = res.json().nextCursor;
    } while (cursor);
    expect(seen.length).toBe(new Set(seen).size);
    expect(seen.length).toBeGreaterThanOrEqual(all.length);

    const future = new Date(Date.now() + 60_000).toISOString();
    expect(
      (await t.request({ method: "GET", url: `/v1/audit?since=${future}`, token: ADMIN_TOKEN })).json().records,
    ).toEqual([]);
    expect(
      (await t.request({ method: "GET", url: "/v1/audit?since=yesterday", token: ADMIN_TOKEN })).json().field,
    ).toBe("since");

    // A project admin sees its own project only; a member none.
    const other = await t.request({ method: "GET", url: "/v1/audit", token: t.otherToken });
    expect(other.statusCode).toBe(200);
    expect(other.json().records.every((r: Row) => r.projectId === t.otherProjectId)).toBe(true);
    expect(
      (await t.request({ method: "GET", url: `/v1/audit?project=${t.projectId}`, token: t.otherToken })).statusCode,
    ).toBe(403);
    const member = await mintProjectToken(t.db, t.projectId, "member");
    expect((await t.request({ method: "GET", url: "/v1/audit", token: member })).statusCode).toBe(403);
  });

  it("records a write the role check refused, with who was refused", async () => {
    const t = f.t;
    const reader = await mintProjectToken(t.db, t.projectId, "reader");
    const res = await t.request({ method: "DELETE", url: `/v4/${t.projectId}/clusters/${clusterId}`, token: reader });
    expect(res.statusCode).toBe(403);
    const refused = await waitFor("the refusal recorded", async () =>
      (await rows()).find((r) => r.method === "DELETE" && r.target === clusterId),
    );
    expect(refused).toMatchObject({ status: 403, actor: "token", projectId: t.projectId, operationId: null });
    expect(JSON.stringify(refused)).not.toContain(reader);
  });

  it("exports JSON lines for a log shipper", async () => {
    const res = await f.t.request({ method: "GET", url: "/v1/audit?format=jsonl", token: ADMIN_TOKEN });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/x-ndjson/);
    const lines = res.body
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Row);
    expect(lines.length).toBeGreaterThanOrEqual(all.length);
    expect(lines.map((r) => r.id)).toEqual(expect.arrayContaining(all.map((r) => r.id)));
    const byAccept = await f.t.request({
      method: "GET",
      url: `/v1/audit?target=${clusterId}`,
      token: ADMIN_TOKEN,
      headers: { accept: "application/x-ndjson" },
    });
    const targeted = (await rows()).filter((r) => r.target === clusterId);
    expect(targeted.length).toBeGreaterThanOrEqual(3);
    expect(byAccept.body.trimEnd().split("\n").length).toBe(targeted.length);
  });

  it("prunes records older than the retention, and keeps everything with 0", async () => {
    const old = { ...(all[0] as Row), id: "old-record", at: "2020-01-01T00:00:00.000Z" };
    await f.t.db.insert(auditEvents).values(old);
    expect(await pruneAuditRecords(f.t.db, 0)).toBe(0);
    expect(await pruneAuditRecords(f.t.db, 30)).toBe(1);
    expect((await rows()).some((r) => r.id === "old-record")).toBe(false);
    expect((await rows()).length).toBeGreaterThanOrEqual(all.length);
    expect(f.t.settings.auditRetentionDays).toBe(365);
  });
});
