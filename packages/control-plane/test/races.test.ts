import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "./helpers.ts";
import { type Fleet, m, startFleet, w } from "./membership-harness.ts";

/**
 * Requests that race for the same thing, fired at once. On SQLite a transaction holds the one
 * connection, so they queue; on PostgreSQL (the same file runs there, vitest.config.ts) they
 * run on separate connections, and row locks and conditional writes must give the same
 * answers: exactly one wins, the others get what a request after it would get.
 */

let f: Fleet;
beforeAll(async () => {
  f = await startFleet(6, { namePrefix: "race" });
});
afterAll(() => f.close());

const codes = (results: { statusCode: number }[]) => results.map((r) => r.statusCode).sort();

describe("racing requests: one wins, the others hear why", () => {
  it("one host attached to two clusters at once joins one of them", async () => {
    const [a, b] = [await f.createCluster("race-a"), await f.createCluster("race-b")];
    await f.idle();
    const host = f.id(0);
    const results = await Promise.all([f.attach(a, [m(host)]), f.attach(b, [m(host)])]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 400]);
    const loser = results.find((r) => r.statusCode === 400);
    expect(JSON.parse(loser?.body ?? "{}")).toMatchObject({ code: "node_attached", field: "[0].uuid" });
    await f.idle();
    const counts = [await f.cluster(a), await f.cluster(b)].map((c) => c.numMasters).sort();
    expect(counts).toEqual([0, 1]);
  });

  it("one node detached twice at once leaves once", async () => {
    const id = await f.createCluster("race-detach");
    const [master, worker] = [f.id(1), f.id(2)];
    expect((await f.attach(id, [m(master), w(worker)])).statusCode).toBe(200);
    await f.idle();
    const results = await Promise.all([f.detach(id, [w(worker)]), f.detach(id, [w(worker)])]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 409]);
    expect(JSON.parse(results.find((r) => r.statusCode === 409)?.body ?? "{}").code).toBe("already_detaching");
    await f.idle();
    expect(f.sent.filter((c) => c.name === "node.leave" && c.hostId === worker)).toHaveLength(1);
  });

  it("two clusters created with one name at once: one is created, the other is a 409 naming the field", async () => {
    const create = () =>
      f.t.request({ method: "POST", url: `/v4/${f.t.projectId}/clusters`, payload: { name: "race-same" } });
    const results = await Promise.all([create(), create(), create()]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 409, 409]);
    for (const r of results.filter((x) => x.statusCode === 409)) {
      expect(r.json()).toMatchObject({ code: "duplicate_name" });
      expect(r.json().message).toContain("race-same");
    }
    const list = (await f.t.request({ method: "GET", url: `/v4/${f.t.projectId}/clusters` })).json() as {
      name: string;
    }[];
    expect(list.filter((c) => c.name === "race-same")).toHaveLength(1);
  });

  it("clusters created with a VIP at once get keepalived router ids of their own", async () => {
    const create = (i: number) =>
      f.t.request({
        method: "POST",
        url: `/v4/${f.t.projectId}/clusters`,
        payload: { name: `race-vip-${i}`, masterVipIpv4: `10.77.0.${10 + i}`, masterVipIface: "eth0" },
      });
    const results = await Promise.all([0, 1, 2, 3].map(create));
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 200, 200, 200]);
    const ids = await Promise.all(
      results.map(async (r) => (await f.cluster(r.json().uuid as string)).masterVipVrouterId as string),
    );
    expect(new Set(ids).size).toBe(4);
  });

  it("a host named at create while another request attaches it ends in one cluster; the other hears node_attached", async () => {
    const target = await f.createCluster("race-named-target");
    await f.idle();
    const host = f.id(3);
    const results = await Promise.all([
      f.t.request({
        method: "POST",
        url: `/v4/${f.t.projectId}/clusters`,
        payload: { name: "race-named", masterNodes: [host] },
      }),
      f.attach(target, [m(host)]),
    ]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 400]);
    const loser = JSON.parse(results.find((r) => r.statusCode === 400)?.body ?? "{}");
    expect(loser.code).toBe("node_attached");
    expect(["masterNodes[0]", "[0].uuid"]).toContain(loser.field);
  });

  it("two updates of one cluster at once keep each other's change", async () => {
    const id = await f.createCluster("race-update");
    await f.idle();
    const put = (payload: object) =>
      f.t.request({ method: "PUT", url: `/v4/${f.t.projectId}/clusters/${id}`, payload });
    const results = await Promise.all([put({ certExpiryHrs: 48 }), put({ tags: { team: "blue" } })]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([200, 200]);
    await f.idle();
    expect(await f.cluster(id)).toMatchObject({ certExpiryHrs: 48, tags: { team: "blue" } });
  });

  it("one join token spent by two registrations at once lets one host in", async () => {
    const minted = await f.t.request({
      method: "POST",
      url: `/v1/projects/${f.t.projectId}/joinTokens`,
      payload: {},
      token: ADMIN_TOKEN,
    });
    const joinToken = minted.json().token as string;
    const register = (hostname: string) =>
      f.t.request({ method: "POST", url: "/v1/agents/register", payload: { joinToken, hostname }, token: null });
    const results = await Promise.all([register("racer-1"), register("racer-2"), register("racer-3")]);
    expect(codes(results), results.map((r) => r.body).join("\n")).toEqual([201, 403, 403]);
    for (const r of results.filter((x) => x.statusCode === 403)) expect(r.json().code).toBe("join_token_used");
  });
});
