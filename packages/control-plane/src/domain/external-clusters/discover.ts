import type { ApiError } from "../../http/errors.ts";
import { awsApi } from "../cloud-providers/aws/load.ts";
import { type CloudKeelson, storedAccount } from "../cloud-providers/cloud-checks.ts";
import { listProviders } from "../cloud-providers/cloud-providers.ts";
import { listExternalClusters } from "./external-clusters.ts";

/**
 * `discover` (spec §4.2): the EKS clusters of the project's AWS accounts that are not registered
 * yet. Every account's regions (EC2 DescribeRegions) and then every region's clusters (EKS
 * ListClusters) are asked concurrently, each call under KEELSON_CLOUD_CALL_TIMEOUT_MS, so the
 * whole answer takes at most about twice that. A region or account that fails does not fail the
 * answer: it is left out and named in `warnings` (the route logs them and sends them as Warning
 * headers), because one region's outage must not hide the clusters of every other.
 */
export interface DiscoveredCluster {
  id: string;
  provider: "eks";
  cloudProviderID: string;
  providerDetails: { region: string };
}

export interface Discovery {
  clusters: DiscoveredCluster[];
  warnings: string[];
}

const reasonOf = (err: unknown) => (err as ApiError).message ?? String(err);

export async function discoverExternalClusters(keelson: CloudKeelson, projectId: string): Promise<Discovery> {
  const [providers, registered] = await Promise.all([
    listProviders(keelson.db, projectId),
    listExternalClusters(keelson.db, projectId),
  ]);
  const taken = new Set(registered.map((r) => r.externalId));
  const warnings: string[] = [];
  const perAccount = await Promise.all(
    providers
      .filter((p) => p.type === "aws")
      .map(async (provider): Promise<DiscoveredCluster[]> => {
        const account = await storedAccount(keelson, provider.id);
        let regions: string[];
        try {
          regions = (await (await awsApi()).listAwsRegions(account)).map((r) => r.RegionName);
        } catch (err) {
          warnings.push(`account ${provider.name} (${provider.id}): ${reasonOf(err)}`);
          return [];
        }
        const perRegion = await Promise.all(
          regions.map(async (region) => {
            try {
              return (await (await awsApi()).listEksClusterNames(account, region)).map((name) => ({
                id: name,
                provider: "eks" as const,
                cloudProviderID: provider.id,
                providerDetails: { region },
              }));
            } catch (err) {
              warnings.push(`account ${provider.name} (${provider.id}), region ${region}: ${reasonOf(err)}`);
              return [];
            }
          }),
        );
        return perRegion.flat();
      }),
  );
  const clusters = perAccount
    .flat()
    .filter((c) => !taken.has(c.id))
    .sort((a, b) =>
      `${a.cloudProviderID}/${a.providerDetails.region}/${a.id}`.localeCompare(
        `${b.cloudProviderID}/${b.providerDetails.region}/${b.id}`,
      ),
    );
  return { clusters, warnings: warnings.sort() };
}
