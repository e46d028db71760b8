import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import type { ServerSettings } from "../src/settings.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/**
 * A test app pointed at a fresh AWS stand-in, with one AWS account (named "aws") in its project;
 * `pool` is that account's node pool (where an auto-deploy cluster goes).
 */
export async function appWithAwsAccount(
  options: { runOperations?: boolean; settings?: Partial<ServerSettings> } = {},
): Promise<{ t: TestApp; standin: AwsStandin; aws: string; pool: string }> {
  const standin = await startAwsStandin();
  const t = await createTestApp({ ...options, settings: { ...options.settings, awsEndpointUrl: standin.url } });
  return { t, standin, ...(await addAwsAccount(t)) };
}

/** The AWS account "aws" in `t`'s project (its settings point at the stand-in): its id and node pool. */
export async function addAwsAccount(t: TestApp): Promise<{ aws: string; pool: string }> {
  const res = await t.request({
    method: "POST",
    url: `/v4/${t.projectId}/cloudProviders`,
    payload: { name: "aws", type: "aws", ...STANDIN_KEYS },
  });
  if (res.statusCode !== 200) throw new Error(`the AWS account was not created: ${res.body}`);
  const list = await t.request({ method: "GET", url: `/v4/${t.projectId}/cloudProviders` });
  const pool = list.json().find((p: { name: string }) => p.name === "aws").nodePoolUuid;
  return { aws: res.json().uuid, pool };
}

/** A valid v4 create body of an auto-deployed cluster on `pool` (one master, two workers). */
export const awsClusterBody = (pool: string, extra: Record<string, unknown> = {}) => ({
  name: "auto-1",
  nodePoolUuid: pool,
  region: "us-east-1",
  azs: ["us-east-1a"],
  ami: "ami-0123456789abcdef0",
  masterFlavor: "m5.large",
  workerFlavor: "m5.large",
  numMasters: 1,
  numWorkers: 2,
  ...extra,
});
