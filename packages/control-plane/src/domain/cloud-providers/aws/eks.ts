import { type Cluster, DescribeClusterCommand, ListClustersCommand } from "@aws-sdk/client-eks";
import { type AwsAccount, awsCall, eksClient } from "./clients.ts";
import { awsErrorCode } from "./errors.ts";

/**
 * The EKS calls of external clusters (spec §4.2): the clusters of one region (ListClusters,
 * every page, all under one time limit, so a region costs at most KEELSON_CLOUD_CALL_TIMEOUT_MS
 * however many pages it has) and one cluster by name (DescribeCluster; undefined when EKS does
 * not know it).
 */
export interface EksClusterInfo {
  name: string;
  region: string;
  arn: string;
  version: string;
  status: string;
  endpoint: string;
  /** Whether the API endpoint is reachable only from inside its VPC (no public access). */
  private: boolean;
}

function infoOf(region: string, cluster: Cluster): EksClusterInfo {
  return {
    name: cluster.name ?? "",
    region,
    arn: cluster.arn ?? "",
    version: cluster.version ?? "",
    status: cluster.status ?? "",
    endpoint: cluster.endpoint ?? "",
    private: cluster.resourcesVpcConfig?.endpointPublicAccess === false,
  };
}

export async function listEksClusterNames(account: AwsAccount, region: string): Promise<string[]> {
  const eks = eksClient(account, region);
  try {
    return await awsCall(account.settings, `the cluster list (EKS ListClusters in ${region})`, async (abortSignal) => {
      const names: string[] = [];
      let nextToken: string | undefined;
      do {
        const page = await eks.client.send(new ListClustersCommand({ nextToken }), { abortSignal });
        names.push(...(page.clusters ?? []));
        nextToken = page.nextToken ?? undefined;
      } while (nextToken);
      return names;
    });
  } finally {
    eks.release();
  }
}

export async function describeEksCluster(
  account: AwsAccount,
  region: string,
  name: string,
): Promise<EksClusterInfo | undefined> {
  const eks = eksClient(account, region);
  try {
    return await awsCall(account.settings, `the cluster (EKS DescribeCluster in ${region})`, (abortSignal) =>
      eks.client.send(new DescribeClusterCommand({ name }), { abortSignal }).then(
        (answer) => (answer.cluster ? infoOf(region, answer.cluster) : undefined),
        (err: unknown) => {
          if (awsErrorCode(err) === "ResourceNotFoundException") return undefined;
          throw err;
        },
      ),
    );
  } finally {
    eks.release();
  }
}
