import { databaseTime, dialectOf, instanceTokenChecks, joinTokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { type AwsStandin, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { resizeSteps } from "../src/domain/clusters/auto-deploy/aws-resize.ts";
import { lookHoldMs } from "../src/domain/clusters/auto-deploy/token-claim.ts";
import { sweepInstanceTokens } from "../src/domain/clusters/auto-deploy/token-sweep.ts";
import type { StepContext } from "../src/runner/types.ts";
import { addAwsAccount, awsClusterBody } from "./aws-app-fixtures.ts";
import type { TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";
import { twoReplicas } from "./replica-fixtures.ts";

/**
 * The instance token sweep on two control planes of one database (on PostgreSQL two pools, as
 * two processes; on SQLite one file), both sweeping at the same moment: one of them looks at
 * the cluster and renews its token, the other makes no AWS call. The stand-in's call list is
 * the count. A look holds for nine tenths of a sweep period; after it one replica looks again.
 */
let a: TestApp | undefined;
let b: TestApp | undefined;
let standin: AwsStandin | undefined;
afterEach(async () => {
  await b?.close();
  await a?.close();
  await standin?.close();
  a = b = standin = undefined;
});

const MINUTE = 60_000;
const PROXY = "http://proxy.internal:3128";
/** What one renewal of a cluster's two launch templates calls, sorted. */
const ONE_RENEWAL = [
  "CreateLaunchTemplateVersion",
  "CreateLaunchTemplateVersion",
  "DescribeLaunchTemplateVersions",
  "DescribeLaunchTemplateVersions",
  "DescribeLaunchTemplates",
  "ModifyLaunchTemplate",
  "ModifyLaunchTemplate",
];

/** Two replicas, and an auto-deployed cluster past its create's last template call. */
async function clusterOnTwoReplicas() {
  standin = await startAwsStandin();
  // An hour's token renewed in its last half hour: the sweeps' own timers (7.5 min) stay out of the test.
  [a, b] = await twoReplicas({
    awsEndpointUrl: standin.url,
    awsJoinTokenMinutes: 60,
    awsJoinTokenRenewMinutes: 30,
  });
  const { pool } = await addAwsAccount(a);
  const res = await a.request({
    method: "POST",
    url: `/v4/${a.projectId}/clusters`,
    payload: awsClusterBody(pool, { httpProxy: PROXY }),
  });
  expect(res.statusCode, res.body).toBe(200);
  const id = res.json().uuid as string;
  // The create makes the templates, then the masters and the worker group (past its last template call).
  await waitFor("the worker group", () => standin?.autoScaling.groups.size === 1, 30_000);
  expect([...standin.world.launchTemplates.values()].map((lt) => lt.versions.length)).toEqual([1, 1]);
  return { id, world: standin.world };
}

const templateCalls = () => (standin?.calls ?? []).filter((c) => c.action.includes("LaunchTemplate"));
const tokens = async (id: string) =>
  (await a?.db.select().from(joinTokens).where(eq(joinTokens.clusterId, id)))?.length;

describe("the instance token sweep on two replicas", () => {
  it("renews a cluster's token once per period, with one replica's AWS calls", async () => {
    const { id, world } = await clusterOnTwoReplicas();
    if (!a || !b) throw new Error("no replicas");
    const replicas = [a, b];
    const bothSweep = async (at: number) => {
      const [onA = [], onB = []] = await Promise.all(
        replicas.map((t) => sweepInstanceTokens(t.app.keelson, t.app.log, new Date(at))),
      );
      return { onA, onB };
    };
    const lastLook = async () =>
      (await a?.db.select().from(instanceTokenChecks))?.map((r) => [r.clusterId, r.checkedBy]);
    const versions = () => [...world.launchTemplates.values()].map((lt) => lt.versions.length);
    /** Both sweep at `at`: exactly one renews, with one renewal's calls; answers which. */
    const renewedOnce = async (at: number, versionsAfter: number) => {
      const before = templateCalls().length;
      const { onA, onB } = await bothSweep(at);
      expect([...onA, ...onB]).toEqual([id]);
      expect(
        templateCalls()
          .slice(before)
          .map((c) => c.action)
          .sort(),
      ).toEqual(ONE_RENEWAL);
      expect(versions()).toEqual([versionsAfter, versionsAfter]);
      expect(await tokens(id)).toBe(versionsAfter);
      return onA.length > 0 ? "cp-a" : "cp-b";
    };
    const start = Date.now();

    // 31 minutes on, the token is within the margin; both replicas sweep at once.
    const renewer = await renewedOnce(start + 31 * MINUTE, 2);
    expect(await lastLook()).toEqual([[id, renewer]]);
    // The renewed user data boots the cluster's proxy as the first did (httpProxy is create-only, §2.1).
    const userData = () =>
      [...world.launchTemplates.values()].map((lt) => Buffer.from(lt.userData, "base64").toString("utf8"));
    expect(userData().every((text) => text.includes(`export HTTPS_PROXY='${PROXY}'`))).toBe(true);

    // Within the hold neither looks again, though the new token is due 31 minutes later: no AWS call.
    const before = templateCalls().length;
    const held = await bothSweep(start + 62 * MINUTE);
    expect([...held.onA, ...held.onB]).toEqual([]);
    expect(templateCalls().length).toBe(before);
    expect(await tokens(id)).toBe(2);

    // The look put back past the hold (time gone by): one replica looks and renews, with one renewal's calls.
    const holdMs = lookHoldMs(a.app.keelson);
    await a.db
      .update(instanceTokenChecks)
      .set({ checkedAt: databaseTime(dialectOf(a.db), -holdMs - 1_000) })
      .where(eq(instanceTokenChecks.clusterId, id));
    await renewedOnce(start + 62 * MINUTE, 3);
  });

  it("renews once when a resize on one replica and a sweep on the other look at once", async () => {
    const { id, world } = await clusterOnTwoReplicas();
    if (!a || !b) throw new Error("no replicas");
    const db = a.db;
    const versions = () => [...world.launchTemplates.values()].map((lt) => lt.versions.length);
    // The token due by the clock of both (its expiry inside the margin), as time gone by would make it.
    const makeDue = () =>
      db
        .update(joinTokens)
        .set({ expiresAt: new Date(Date.now() + 10 * MINUTE).toISOString() })
        .where(eq(joinTokens.clusterId, id));
    // The resize's own step, as its operation runs it on replica a.
    const renewStep = resizeSteps(a.app.keelson).find((step) => step.name === "aws-renew-token");
    if (!renewStep) throw new Error("the resize has no renewal step");
    const resizeOnA = () =>
      renewStep.run({ db, op: { targetId: id }, log: a?.app.log } as unknown as StepContext) as Promise<void>;
    const sweepOnB = () => sweepInstanceTokens((b as TestApp).app.keelson, (b as TestApp).app.log);
    /**
     * Both at once: `first` starts, and the other as soon as the first's first template call
     * reached the cloud, slow enough here that the other reads the old token before the first
     * writes the new one. Answers the template calls both made, sorted, and who looked last.
     */
    const together = async (first: "sweep" | "resize") => {
      const before = templateCalls().length;
      const [lead, follow] = first === "sweep" ? [sweepOnB, resizeOnA] : [resizeOnA, sweepOnB];
      const leading = lead();
      while (templateCalls().length === before) await new Promise((r) => setTimeout(r, 2));
      await Promise.all([leading, follow()]);
      const look = await db.select().from(instanceTokenChecks).where(eq(instanceTokenChecks.clusterId, id));
      return {
        calls: templateCalls()
          .slice(before)
          .map((c) => c.action)
          .sort(),
        lookedBy: look.map((r) => r.checkedBy),
      };
    };
    (standin as AwsStandin).latencyMs = 40;

    // The sweep first: the resize waits for its look and uses its token.
    await makeDue();
    expect(await together("sweep")).toEqual({ calls: ONE_RENEWAL, lookedBy: ["cp-b"] });
    expect(versions()).toEqual([2, 2]);
    expect(await tokens(id)).toBe(2);

    // Within the hold a resize uses the fresh renewal: no AWS call, no new token.
    const before = templateCalls().length;
    await resizeOnA();
    expect(templateCalls().length).toBe(before);
    expect(await tokens(id)).toBe(2);

    // Past the hold, with the new token due too, the resize first: the sweep skips the cluster.
    await db
      .update(instanceTokenChecks)
      .set({ checkedAt: databaseTime(dialectOf(db), -lookHoldMs(a.app.keelson) - 1_000) })
      .where(eq(instanceTokenChecks.clusterId, id));
    await makeDue();
    expect(await together("resize")).toEqual({ calls: ONE_RENEWAL, lookedBy: ["cp-a"] });
    expect(versions()).toEqual([3, 3]);
    expect(await tokens(id)).toBe(3);

    // A look that fails (AWS refuses the keys) gives its claim up: a resize next looks at once, not a hold later.
    await db
      .update(instanceTokenChecks)
      .set({ checkedAt: databaseTime(dialectOf(db), -lookHoldMs(a.app.keelson) - 1_000) })
      .where(eq(instanceTokenChecks.clusterId, id));
    await makeDue();
    const keys = new Map((standin as AwsStandin).keys);
    (standin as AwsStandin).keys.clear();
    expect(await sweepOnB()).toEqual([]);
    expect(await db.select().from(instanceTokenChecks)).toEqual([]);
    for (const [key, secret] of keys) (standin as AwsStandin).keys.set(key, secret);
    await resizeOnA();
    expect(versions()).toEqual([4, 4]);
  });
});
