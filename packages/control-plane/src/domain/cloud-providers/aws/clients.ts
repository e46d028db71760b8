import { EC2Client } from "@aws-sdk/client-ec2";
import { Route53Client } from "@aws-sdk/client-route-53";
import { STSClient } from "@aws-sdk/client-sts";
import type { ServerSettings } from "../../../settings.ts";
import type { Credentials } from "../credentials.ts";
import { apiErrorOf } from "./errors.ts";

/**
 * The AWS SDK clients of one account, built from the server's settings: the endpoint override
 * (AWS_ENDPOINT_URL and the per-service AWS_ENDPOINT_URL_<SERVICE>, the SDK's own names, parsed
 * once in settings.ts), the account's credentials (never the machine's own AWS profile) and a
 * time limit on every call (KEELSON_CLOUD_CALL_TIMEOUT_MS).
 */
export type AwsSettings = Pick<
  ServerSettings,
  "awsEndpointUrl" | "awsEndpointUrlSts" | "awsEndpointUrlEc2" | "awsEndpointUrlRoute53" | "cloudCallTimeoutMs"
>;

/** STS, Route 53 and the region list are global: AWS serves them from (and signs them for) us-east-1. */
export const GLOBAL_REGION = "us-east-1";

export interface AwsAccount {
  settings: AwsSettings;
  credentials: Credentials;
}

function config(account: AwsAccount, region: string, endpoint: string | undefined) {
  return {
    region,
    credentials: { accessKeyId: account.credentials.key, secretAccessKey: account.credentials.secret },
    ...(endpoint ? { endpoint } : {}),
  };
}

export const stsClient = (account: AwsAccount) =>
  new STSClient(config(account, GLOBAL_REGION, account.settings.awsEndpointUrlSts ?? account.settings.awsEndpointUrl));

export const ec2Client = (account: AwsAccount, region: string) =>
  new EC2Client(config(account, region, account.settings.awsEndpointUrlEc2 ?? account.settings.awsEndpointUrl));

export const route53Client = (account: AwsAccount) =>
  new Route53Client(
    config(account, GLOBAL_REGION, account.settings.awsEndpointUrlRoute53 ?? account.settings.awsEndpointUrl),
  );

/**
 * One AWS call under the time limit: the signal aborts the SDK's request (and its retries), and
 * the race answers even if something inside the SDK does not listen to it. A failure becomes the
 * API error the caller should see (errors.ts); `what` names the call in that message.
 */
export async function awsCall<T>(
  settings: AwsSettings,
  what: string,
  call: (abortSignal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const timeout = Object.assign(new Error("deadline"), { name: "TimeoutError" });
      controller.abort(timeout);
      reject(timeout);
    }, settings.cloudCallTimeoutMs);
  });
  try {
    return await Promise.race([call(controller.signal), deadline]);
  } catch (err) {
    throw apiErrorOf(err, what, settings.cloudCallTimeoutMs);
  } finally {
    clearTimeout(timer);
  }
}
