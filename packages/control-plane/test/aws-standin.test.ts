import { DescribeClusterCommand, EKSClient, ListClustersCommand } from "@aws-sdk/client-eks";
import { GetCallerIdentityCommand, STSClient } from "@aws-sdk/client-sts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { CloudClientCache } from "../src/domain/cloud-providers/client-cache.ts";

/**
 * The AWS stand-in is strict where AWS is: it is only worth testing against if a request AWS
 * would refuse is refused here too, in AWS's words and XML shapes.
 */
describe("AWS stand-in", () => {
  let standin: AwsStandin;
  beforeAll(async () => {
    standin = await startAwsStandin();
  });
  afterAll(async () => standin.close());

  const sts = (middleware?: (request: { body: string }) => void) => {
    const client = new STSClient({
      region: "us-east-1",
      endpoint: standin.url,
      credentials: { accessKeyId: STANDIN_KEYS.key, secretAccessKey: STANDIN_KEYS.secret },
      maxAttempts: 1,
    });
    if (middleware) {
      // The deserialize step runs after signing: what it changes is no longer what was signed.
      client.middlewareStack.add(
        (next) => async (args) => {
          middleware(args.request as { body: string });
          return next(args);
        },
        { step: "deserialize" },
      );
    }
    return client;
  };

  it("answers a signed GetCallerIdentity with the account", async () => {
    const client = sts();
    const identity = await client.send(new GetCallerIdentityCommand({}));
    client.destroy();
    expect(identity).toMatchObject({ Account: "123456789012", Arn: "arn:aws:iam::123456789012:user/keelson" });
  });

  it("refuses a request changed after it was signed: SignatureDoesNotMatch", async () => {
    const client = sts((request) => {
      // Same length, so the Content-Length that was signed still fits.
      request.body = request.body.replace("2011-06-15", "2011-06-16");
    });
    await expect(client.send(new GetCallerIdentityCommand({}))).rejects.toMatchObject({
      name: "SignatureDoesNotMatch",
      $metadata: { httpStatusCode: 403 },
    });
    client.destroy();
  });

  describe("EKS (REST-JSON)", () => {
    const eks = (secretAccessKey = STANDIN_KEYS.secret, region = "us-east-1") =>
      new EKSClient({
        region,
        endpoint: standin.url,
        credentials: { accessKeyId: STANDIN_KEYS.key, secretAccessKey },
        maxAttempts: 1,
      });

    it("lists a region's clusters page by page and describes one", async () => {
      const client = eks();
      const first = await client.send(new ListClustersCommand({ maxResults: 1 }));
      expect(first.clusters).toEqual(["payments"]);
      const second = await client.send(new ListClustersCommand({ maxResults: 1, nextToken: first.nextToken }));
      expect(second).toMatchObject({ clusters: ["prod-east"] });
      expect(second.nextToken).toBeUndefined();
      const { cluster } = await client.send(new DescribeClusterCommand({ name: "payments" }));
      expect(cluster).toMatchObject({
        name: "payments",
        arn: "arn:aws:eks:us-east-1:123456789012:cluster/payments",
        status: "ACTIVE",
        resourcesVpcConfig: { endpointPublicAccess: false },
      });
      expect(cluster?.createdAt).toBeInstanceOf(Date);
      client.destroy();
    });

    it("answers EKS's errors in its shape: unknown cluster, wrong secret, bad parameter", async () => {
      const client = eks();
      await expect(client.send(new DescribeClusterCommand({ name: "analytics" }))).rejects.toMatchObject({
        name: "ResourceNotFoundException",
        message: "No cluster found for name: analytics.",
        $metadata: { httpStatusCode: 404 },
      });
      await expect(client.send(new ListClustersCommand({ maxResults: 101 }))).rejects.toMatchObject({
        name: "InvalidParameterException",
      });
      client.destroy();
      const wrong = eks("x".repeat(40));
      await expect(wrong.send(new ListClustersCommand({}))).rejects.toMatchObject({
        name: "InvalidSignatureException",
        $metadata: { httpStatusCode: 403 },
      });
      wrong.destroy();
    });
  });

  it("refuses an unsigned request in STS's error shape", async () => {
    const res = await fetch(standin.url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "Action=GetCallerIdentity&Version=2011-06-15",
    });
    expect(res.status).toBe(403);
    const xml = await res.text();
    expect(xml).toMatch(
      /^<\?xml[^>]*\?>\n<ErrorResponse xmlns="https:\/\/sts\.amazonaws\.com\/doc\/2011-06-15\/"><Error><Type>Sender<\/Type><Code>MissingAuthenticationToken<\/Code><Message>Request is missing Authentication Token<\/Message><\/Error><RequestId>[0-9a-f-]{36}<\/RequestId><\/ErrorResponse>$/,
    );
  });

  it("answers an unknown EC2 action in EC2's error shape", async () => {
    const res = await fetch(standin.url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "Action=RunInstances&Version=2016-11-15",
    });
    const xml = await res.text();
    expect(res.status).toBe(403);
    expect(xml).toContain("<Response><Errors><Error><Code>MissingAuthenticationToken</Code>");
    expect(xml).toMatch(/<RequestID>[0-9a-f-]{36}<\/RequestID><\/Response>$/);
  });
});

describe("AWS client cache", () => {
  const fake = () => ({
    destroyed: false,
    destroy() {
      this.destroyed = true;
    },
  });

  it("reuses a client per key, makes a new one for new credentials, and destroys all on close", () => {
    const cache = new CloudClientCache();
    const key = (secret: string) => CloudClientCache.keyOf(secret, "aws", "sts", undefined, "us-east-1", "AKIA1");
    const first = cache.get(key("a"), fake);
    expect(cache.get(key("a"), fake)).toBe(first);
    const rekeyed = cache.get(key("b"), fake);
    expect(rekeyed).not.toBe(first);
    expect(key("a")).not.toContain("a|");
    cache.destroy();
    expect([first.destroyed, rekeyed.destroyed]).toEqual([true, true]);
    expect(cache.size).toBe(0);
  });

  it("drops the least recently used client beyond its limit and destroys it after the grace", async () => {
    const cache = new CloudClientCache(2, 10);
    const a = cache.get("a", fake);
    const b = cache.get("b", fake);
    cache.get("a", fake); // a is now the most recent
    cache.get("c", fake);
    expect(cache.size).toBe(2);
    expect(cache.get("a", fake)).toBe(a);
    expect(b.destroyed).toBe(false); // calls it carries may still finish
    await new Promise((r) => setTimeout(r, 30));
    expect(b.destroyed).toBe(true);
    expect(a.destroyed).toBe(false);
    cache.destroy();
  });
});
