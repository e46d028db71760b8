import { AutoScalingClient } from "@aws-sdk/client-auto-scaling";
import { EC2Client } from "@aws-sdk/client-ec2";
import { EKSClient } from "@aws-sdk/client-eks";
import { ElasticLoadBalancingV2Client } from "@aws-sdk/client-elastic-load-balancing-v2";
import { Route53Client } from "@aws-sdk/client-route-53";
import { STSClient } from "@aws-sdk/client-sts";
import type { ServerSettings } from "../../../settings.ts";
import { CloudClientCache } from "../client-cache.ts";
import { cloudCall } from "../cloud-call.ts";
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
  | "awsEndpointUrl"
  | "awsEndpointUrlSts"
  | "awsEndpointUrlEc2"
  | "awsEndpointUrlRoute53"
  | "awsEndpointUrlEks"
  | "awsEndpointUrlAutoScaling"
  | "awsEndpointUrlElasticLoadBalancingV2"
  | "cloudCallTimeoutMs"
>;

/** STS, Route 53 and the region list are global: AWS serves them from (and signs them for) us-east-1. */
export const GLOBAL_REGION = "us-east-1";

export interface AwsAccount {
  settings: AwsSettings;
  credentials: Credentials;
  /** The server's kept clients (client-cache.ts); without it each call gets a client of its own. */
  clients?: CloudClientCache;
}

/** A client for one request; `release` destroys it unless the cache keeps it. */
export interface Lease<C> {
  client: C;
  release(): void;
}

type Service = "sts" | "ec2" | "route53" | "eks" | "autoscaling" | "elbv2";

/** Each service's own endpoint setting; AWS_ENDPOINT_URL stands for any that is unset. */
const SERVICE_ENDPOINT = {
  sts: "awsEndpointUrlSts",
  ec2: "awsEndpointUrlEc2",
  route53: "awsEndpointUrlRoute53",
  eks: "awsEndpointUrlEks",
  autoscaling: "awsEndpointUrlAutoScaling",
  elbv2: "awsEndpointUrlElasticLoadBalancingV2",
} as const satisfies Record<Service, keyof AwsSettings>;

type ClientConfig = {
  region: string;
  endpoint?: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
};

function lease<C extends { destroy(): void }>(
  account: AwsAccount,
  service: Service,
  region: string,
  make: (config: ClientConfig) => C,
): Lease<C> {
  const { key, secret } = account.credentials;
  const endpoint = account.settings[SERVICE_ENDPOINT[service]] ?? account.settings.awsEndpointUrl;
  const build = () =>
    make({ region, credentials: { accessKeyId: key, secretAccessKey: secret }, ...(endpoint ? { endpoint } : {}) });
  const cache = account.clients;
  if (!cache) {
    const client = build();
    return { client, release: () => client.destroy() };
  }
  const client = cache.get(CloudClientCache.keyOf(secret, "aws", service, endpoint, region, key), build);
  return { client, release: () => {} };
}

export const stsClient = (account: AwsAccount) => lease(account, "sts", GLOBAL_REGION, (c) => new STSClient(c));
export const ec2Client = (account: AwsAccount, region: string) =>
  lease(account, "ec2", region, (c) => new EC2Client(c));
export const route53Client = (account: AwsAccount) =>
  lease(account, "route53", GLOBAL_REGION, (c) => new Route53Client(c));
export const eksClient = (account: AwsAccount, region: string) =>
  lease(account, "eks", region, (c) => new EKSClient(c));
export const autoScalingClient = (account: AwsAccount, region: string) =>
  lease(account, "autoscaling", region, (c) => new AutoScalingClient(c));
export const elbv2Client = (account: AwsAccount, region: string) =>
  lease(account, "elbv2", region, (c) => new ElasticLoadBalancingV2Client(c));

/** One AWS call under the time limit (cloud-call.ts); `what` names the call in a failure's message (errors.ts). */
export function awsCall<T>(
  settings: AwsSettings,
  what: string,
  call: (abortSignal: AbortSignal) => Promise<T>,
): Promise<T> {
  return cloudCall(settings.cloudCallTimeoutMs, call, (err) => apiErrorOf(err, what, settings.cloudCallTimeoutMs));
}
