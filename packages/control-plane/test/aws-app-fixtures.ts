import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import { createTestApp, type TestApp } from "./helpers.ts";

/** A test app pointed at a fresh AWS stand-in, with one AWS account (named "aws") in its project. */
export async function appWithAwsAccount(): Promise<{ t: TestApp; standin: AwsStandin; aws: string }> {
  const standin = await startAwsStandin();
  const t = await createTestApp({ settings: { awsEndpointUrl: standin.url } });
  const res = await t.request({
    method: "POST",
    url: `/v4/${t.projectId}/cloudProviders`,
    payload: { name: "aws", type: "aws", ...STANDIN_KEYS },
  });
  if (res.statusCode !== 200) throw new Error(`the AWS account was not created: ${res.body}`);
  return { t, standin, aws: res.json().uuid };
}
