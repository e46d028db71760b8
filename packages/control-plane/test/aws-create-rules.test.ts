import { clusters, firstRow, operations } from "@keelson/db";
import { eq } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import type { AwsStandin } from "../../../test/aws-standin/server.ts";
import { appWithAwsAccount } from "./aws-app-fixtures.ts";
import type { TestApp } from "./helpers.ts";

/**
 * Cluster create on an AWS node pool: the checks a request meets before anything is stored
 * (each a 400 naming its field), the API's DNS name against the account's Route 53 zones (the
 * stand-in's: example.com public, internal.example private), and what a good request records.
 * Operations do not run here: the e2e aws-auto-deploy runs them.
 */
let t: TestApp;
let standin: AwsStandin;
let pool: string;
afterEach(async () => {
  await t?.close();
  await standin?.close();
});

async function start() {
  ({ t, standin, pool } = await appWithAwsAccount({ runOperations: false }));
}

const body = (extra: Record<string, unknown> = {}) => ({
  name: "auto-1",
  nodePoolUuid: pool,
  region: "us-east-1",
  azs: ["us-east-1a", "us-east-1b"],
  ami: "ami-0123456789abcdef0",
  masterFlavor: "m5.large",
  workerFlavor: "m5.large",
  numMasters: 3,
  numWorkers: 2,
  ...extra,
});
const create = (payload: object) => t.request({ method: "POST", url: `/v4/${t.projectId}/clusters`, payload });

describe("cluster create on an AWS node pool", () => {
  it("answers 400 naming the field for each rule, storing nothing", async () => {
    await start();
    const cases: [Record<string, unknown>, string][] = [
      [{ region: undefined }, "region"],
      [{ masterFlavor: "large" }, "masterFlavor"],
      [{ azs: [] }, "azs"],
      [{ azs: ["us-east-1a", "us-west-2a"] }, "azs[1]"],
      [{ masterNodes: ["x"] }, "masterNodes"],
      [{ vpc: "vpc-0abc12345", isPrivate: false }, "subnets"],
      [{ vpc: "vpc-0abc12345", subnets: ["sn-1"] }, "subnets[0]"],
      [{ internalElb: true, isPrivate: true, vpc: "vpc-0abc12345", subnets: ["subnet-0abc12345"] }, "httpProxy"],
      [{ httpProxy: "ftp://proxy:21" }, "httpProxy"],
      // The API's DNS name: a zone is needed, it must be the account's, and the name inside it.
      [{ useVendorDomain: true }, "domainId"],
      [{ externalDnsName: "api.example.com" }, "domainId"],
      [{ externalDnsName: "api.example.com", domainId: "Z0NOTTHISACCOUNT" }, "domainId"],
      [{ externalDnsName: "api.other.org", domainId: "Z0STANDIN00PUBLIC" }, "externalDnsName"],
      [{ externalDnsName: "example.com", domainId: "Z0STANDIN00PUBLIC" }, "externalDnsName"],
      [{ name: "Auto_1", useVendorDomain: true, domainId: "Z0STANDIN00PUBLIC" }, "name"],
    ];
    for (const [extra, field] of cases) {
      const res = await create(body(extra));
      expect(res.statusCode, `${JSON.stringify(extra)}: ${res.body}`).toBe(400);
      expect(res.json().field, JSON.stringify(extra)).toBe(field);
    }
    expect(await t.db.select().from(clusters)).toEqual([]);
    expect(await t.db.select().from(operations).where(eq(operations.kind, "cluster.aws-create"))).toEqual([]);
    // Nothing was made in the cloud either.
    expect(standin.world.live()).toEqual([]);
  });

  it("records the auto deploy operation with the generated or given DNS name in the zone", async () => {
    await start();
    const vendor = await create(body({ useVendorDomain: true, domainId: "/hostedzone/Z0STANDIN00PUBLIC" }));
    expect(vendor.statusCode, vendor.body).toBe(200);
    const given = await create(
      body({ name: "auto-2", externalDnsName: "API.Internal.Example", domainId: "Z0STANDIN0PRIVATE" }),
    );
    expect(given.statusCode, given.body).toBe(200);

    const read = async (id: string) =>
      (await t.request({ method: "GET", url: `/v4/${t.projectId}/clusters/${id}` })).json();
    expect(await read(vendor.json().uuid)).toMatchObject({
      externalDnsName: "auto-1.example.com",
      domainId: "Z0STANDIN00PUBLIC",
      status: "creating",
    });
    expect(await read(given.json().uuid)).toMatchObject({
      externalDnsName: "api.internal.example",
      domainId: "Z0STANDIN0PRIVATE",
    });
    const op = firstRow(await t.db.select().from(operations).where(eq(operations.targetId, vendor.json().uuid)));
    expect(op).toMatchObject({ kind: "cluster.aws-create", state: "pending" });
    expect(op?.params).toEqual({ controlPlane: expect.stringMatching(/^http:\/\/localhost/) });
  });
});
