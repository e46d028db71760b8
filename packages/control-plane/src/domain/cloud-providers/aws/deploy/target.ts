import type { ResourceType, TagSpecification } from "@aws-sdk/client-ec2";
import {
  type AwsAccount,
  autoScalingClient,
  awsCall,
  ec2Client,
  elbv2Client,
  type Lease,
  route53Client,
} from "../clients.ts";
import { awsErrorCode } from "../errors.ts";

/**
 * Where one cluster's cloud resources live, and the one way the deploy steps call AWS: through
 * the server's kept clients, under the call time limit, counting calls (the bench reports them).
 * Every resource a cluster creates carries `keelson:cluster=<uuid>`, the tag a resumed step and
 * the teardown find it by; names AWS wants unique are derived from the uuid, so a retried create
 * meets the first one's resource instead of making a second.
 */
export const CLUSTER_TAG = "keelson:cluster";
export const ROLE_TAG = "keelson:role";

export interface DeployTarget {
  account: AwsAccount;
  region: string;
  clusterId: string;
  /** Calls made through this target so far. */
  calls: number;
}

/** What the steps need of an SDK client; each client's send() differs only in its command types. */
interface AnyClient {
  // biome-ignore lint/suspicious/noExplicitAny: any command of the client's service.
  send(command: any, options: { abortSignal: AbortSignal }): Promise<unknown>;
  destroy(): void;
}
type Services = "ec2" | "autoscaling" | "elbv2" | "route53";
const LEASES: Record<Services, (account: AwsAccount, region: string) => Lease<AnyClient>> = {
  ec2: ec2Client,
  autoscaling: autoScalingClient,
  elbv2: elbv2Client,
  route53: (account) => route53Client(account),
};

/**
 * One call of `command` on `service`. AWS error codes in `tolerate` answer undefined instead of
 * failing (a delete of what is gone, a create of what exists); anything else is the API error
 * awsCall makes of it.
 */
export async function send<T>(
  target: DeployTarget,
  service: Services,
  // biome-ignore lint/suspicious/noExplicitAny: any SDK command of that service.
  command: any,
  tolerate: readonly string[] = [],
): Promise<T | undefined> {
  const { client, release } = LEASES[service](target.account, target.region);
  const name = (command.constructor?.name ?? "call").replace(/Command$/, "");
  try {
    target.calls++;
    return await awsCall(target.account.settings, `${name} (${service} in ${target.region})`, async (abortSignal) => {
      try {
        return (await client.send(command, { abortSignal })) as T;
      } catch (err) {
        if (tolerate.includes(awsErrorCode(err) ?? "")) return undefined;
        throw err;
      }
    });
  } finally {
    release();
  }
}

export const clusterTags = (target: DeployTarget, role?: string) => [
  { Key: CLUSTER_TAG, Value: target.clusterId },
  ...(role ? [{ Key: ROLE_TAG, Value: role }] : []),
];

/** EC2's TagSpecifications for one resource type. */
export const tagSpec = (target: DeployTarget, type: ResourceType, role?: string): TagSpecification[] => [
  { ResourceType: type, Tags: clusterTags(target, role) },
];

/** The EC2 filter that finds this cluster's resources. */
export const clusterFilter = (target: DeployTarget) => [{ Name: `tag:${CLUSTER_TAG}`, Values: [target.clusterId] }];

/** A name AWS wants unique and short (ELBv2: 32 characters, letters, digits, hyphens). */
export const shortName = (target: DeployTarget, suffix: string) =>
  `k${target.clusterId.replaceAll("-", "").slice(0, 20)}-${suffix}`;
