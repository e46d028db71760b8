import { joinTokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { AwsStandin } from "../../../test/aws-standin/server.ts";
import { renewInstanceToken } from "../src/domain/clusters/auto-deploy/aws-token.ts";
import { useJoinToken } from "../src/domain/identity/join-tokens.ts";
import { appWithAwsAccount, awsClusterBody } from "./aws-app-fixtures.ts";
import type { TestApp } from "./helpers.ts";
import { waitFor } from "./membership-harness.ts";

/**
 * The instance join token of an auto-deployed cluster, renewed before it expires: with a
 * two-minute token and a one-minute margin, nothing happens while it is fresh; within the
 * margin a new token goes into new default versions of both launch templates (what the group
 * launches from then on), the old token still registers until it expires, and a second look
 * renews nothing more.
 */
let t: TestApp;
let standin: AwsStandin;
afterEach(async () => {
  await t?.close();
  await standin?.close();
});

const TOKEN = /kjt_[A-Za-z0-9_-]+/;

describe("renewing an auto-deployed cluster's instance join token", () => {
  it("mints a new token into new default template versions within the margin, and only then", async () => {
    let pool: string;
    ({ t, standin, pool } = await appWithAwsAccount({
      runOperations: true,
      settings: { awsJoinTokenMinutes: 2, awsJoinTokenRenewMinutes: 1 },
    }));
    const res = await t.request({
      method: "POST",
      url: `/v4/${t.projectId}/clusters`,
      payload: awsClusterBody(pool),
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().uuid as string;
    const templates = () =>
      [...standin.world.launchTemplates.values()].filter(
        (lt) => standin.world.tags.get(lt.launchTemplateId)?.tags.get("keelson:cluster") === id,
      );
    // The create makes the templates, then waits for hosts that never come here.
    await waitFor("the launch templates", () => templates().length === 2, 30_000);
    const tokenOf = (userData: string) => TOKEN.exec(Buffer.from(userData, "base64").toString())?.[0] as string;
    const first = tokenOf(templates()[0]?.userData as string);
    expect(templates().map((lt) => tokenOf(lt.userData))).toEqual([first, first]);
    const k = t.app.keelson;
    const now = Date.now();

    expect(await renewInstanceToken(k, t.db, id, new Date(now + 30_000))).toBe(false);
    expect(templates().map((lt) => lt.versions.length)).toEqual([1, 1]);

    expect(await renewInstanceToken(k, t.db, id, new Date(now + 70_000))).toBe(true);
    const second = tokenOf(templates()[0]?.userData as string);
    expect(second).not.toBe(first);
    expect(templates().map((lt) => [lt.defaultVersion, lt.versions.length, tokenOf(lt.userData)])).toEqual([
      [2, 2, second],
      [2, 2, second],
    ]);
    // The rest of the template is the version before's.
    expect(templates().map((lt) => lt.imageId)).toEqual(["ami-0123456789abcdef0", "ami-0123456789abcdef0"]);
    const rows = await t.db.select().from(joinTokens).where(eq(joinTokens.clusterId, id));
    expect(rows).toHaveLength(2);
    // Both register (the old one until it expires), into this cluster.
    for (const token of [first, second]) {
      await t.db.transaction(async (tx) => {
        expect(await useJoinToken(tx, token, "node-x", new Date(now + 70_000))).toMatchObject({ clusterId: id });
      });
    }
    await t.db.transaction(async (tx) => {
      await expect(useJoinToken(tx, first, "node-x", new Date(now + 130_000))).rejects.toMatchObject({
        code: "join_token_expired",
      });
    });

    // The new token is fresh: no second renewal.
    expect(await renewInstanceToken(k, t.db, id, new Date(now + 80_000))).toBe(false);
    expect(templates().map((lt) => lt.versions.length)).toEqual([2, 2]);
  });
});
