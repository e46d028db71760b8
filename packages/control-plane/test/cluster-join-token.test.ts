import { clusters, firstRow, joinTokens, nodes } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { createJoinToken } from "../src/domain/identity/join-tokens.ts";
import { hashSecret } from "../src/domain/identity/token-hash.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/**
 * The join token of an auto deploy's instances: one token in one launch template serves every
 * instance, so it is not spent; each registration names its instance, lands in the cluster's
 * node pool unattached, and the cluster's delete revokes the token.
 */
let t: TestApp;
afterEach(async () => {
  await t?.close();
});

async function clusterWithToken(minutes?: number) {
  t = await createTestApp();
  const res = await t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload: { name: "c1" } });
  expect(res.statusCode).toBe(200);
  await t.app.keelson.runner.idle();
  const cluster = firstRow(await t.db.select().from(clusters).where(eq(clusters.name, "c1")));
  if (!cluster) throw new Error("no cluster");
  const issued = await createJoinToken(t.db, t.projectId, {
    clusterId: cluster.id,
    ...(minutes ? { expiresInMinutes: minutes } : {}),
  });
  return { cluster, token: issued.token };
}

const register = (joinToken: string, hostname: string, extra: object = {}) =>
  t.request({
    method: "POST",
    url: "/v1/agents/register",
    payload: { joinToken, hostname, ...extra },
    token: null,
  });

describe("a cluster's join token", () => {
  it("registers many instances, each once, into the cluster's pool, and is never spent", async () => {
    const { cluster, token } = await clusterWithToken();
    const ids: string[] = [];
    for (const [i, instance] of ["i-0a1", "i-0a2", "i-0a3"].entries()) {
      const res = await register(token, `ip-10-0-0-${i}`, { cloudInstanceId: instance });
      expect(res.statusCode).toBe(201);
      ids.push(res.json().hostId);
    }
    expect(new Set(ids).size).toBe(3);
    const rows = await t.db.select().from(nodes).where(eq(nodes.nodePoolId, cluster.nodePoolId));
    expect(rows.filter((r) => ids.includes(r.id)).map((r) => [r.cloudInstanceId, r.clusterId])).toEqual([
      ["i-0a1", null],
      ["i-0a2", null],
      ["i-0a3", null],
    ]);
    const tokenRow = firstRow(
      await t.db
        .select()
        .from(joinTokens)
        .where(eq(joinTokens.tokenHash, hashSecret(token))),
    );
    expect(tokenRow).toMatchObject({ clusterId: cluster.id, usedAt: null, usedByNodeId: null });

    // The v3 node record carries the instance id.
    const v3 = await t.request({ method: "GET", url: `/v3/${t.projectId}/nodes/${ids[0]}` });
    expect(v3.json().cloudInstanceId).toBe("i-0a1");
  });

  it("requires the instance id, and refuses a second host for one instance unless it is the same one asking again", async () => {
    const { token } = await clusterWithToken();
    const before = (await t.db.select().from(nodes)).length;
    const bare = await register(token, "ip-10-0-0-9");
    expect(bare.statusCode).toBe(400);
    expect(bare.json()).toMatchObject({ code: "invalid_field", field: "cloudInstanceId" });
    expect((await t.db.select().from(nodes)).length).toBe(before);

    const credential = `khc_${"a".repeat(43)}`;
    const first = await register(token, "ip-10-0-0-1", { cloudInstanceId: "i-0b1", credential });
    expect(first.statusCode).toBe(201);
    const again = await register(token, "ip-10-0-0-1", { cloudInstanceId: "i-0b1", credential });
    expect(again.statusCode).toBe(201);
    expect(again.json().hostId).toBe(first.json().hostId);
    const thief = await register(token, "ip-10-0-0-1", {
      cloudInstanceId: "i-0b1",
      credential: `khc_${"b".repeat(43)}`,
    });
    expect(thief.statusCode).toBe(409);
    expect(thief.json()).toMatchObject({ code: "instance_registered", field: "cloudInstanceId" });
    expect((await t.db.select().from(nodes)).length).toBe(before + 1);
  });

  it("expires, and is revoked when the cluster is deleted", async () => {
    const { cluster, token } = await clusterWithToken(5);
    await t.db
      .update(joinTokens)
      .set({ expiresAt: "2000-01-01T00:00:00.000Z" })
      .where(eq(joinTokens.tokenHash, hashSecret(token)));
    const late = await register(token, "ip-10-0-0-1", { cloudInstanceId: "i-0c1" });
    expect(late.statusCode).toBe(403);
    expect(late.json().code).toBe("join_token_expired");

    const fresh = await createJoinToken(t.db, t.projectId, { clusterId: cluster.id });
    expect((await register(fresh.token, "ip-10-0-0-2", { cloudInstanceId: "i-0c2" })).statusCode).toBe(201);
    const del = await t.request({ method: "DELETE", url: `/v4/${t.projectId}/clusters/${cluster.id}` });
    expect(del.statusCode).toBe(200);
    await t.app.keelson.runner.idle();
    expect(firstRow(await t.db.select().from(clusters).where(eq(clusters.id, cluster.id)))).toBeUndefined();
    expect(await t.db.select().from(joinTokens).where(eq(joinTokens.clusterId, cluster.id))).toEqual([]);
    const after = await register(fresh.token, "ip-10-0-0-3", { cloudInstanceId: "i-0c3" });
    expect(after.statusCode).toBe(403);
    expect(after.json().code).toBe("join_token_unknown");
  });
});
