import { randomUUID } from "node:crypto";
import { type Db, externalClusters, firstRow, type Tx } from "@keelson/db";
import { and, eq, or } from "drizzle-orm";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import { awsApi } from "../cloud-providers/aws/load.ts";
import { type CloudKeelson, storedAccount } from "../cloud-providers/cloud-checks.ts";
import { getProvider } from "../cloud-providers/cloud-providers.ts";

/**
 * External (third-party-hosted) clusters, spec §2.5 and §4.2. A registration is checked in
 * this order: the body's shape (400), the account (404 unknown, 400 of the wrong cloud), a
 * cluster registered already (409), then the cloud: the region must be one the account has
 * (400) and the provider must know the cluster (404). EKS is asked through the AWS SDK
 * (cloud-providers/aws/eks.ts); AKS and GKE are refused with a 400 until Keelson calls their
 * clouds, because it cannot tell whether such a cluster exists.
 */
export interface Registration {
  id: string;
  provider: string;
  cloudProviderID: string;
  providerDetails: Record<string, unknown>;
}

export type ExternalClusterRow = typeof externalClusters.$inferSelect;

/** Each managed Kubernetes service runs on the public cloud of one provider account type. */
export const EXTERNAL_PROVIDERS = { eks: "aws", aks: "azure", gke: "gcp" } as const;
export type ExternalProvider = keyof typeof EXTERNAL_PROVIDERS;
/** The services whose clusters Keelson can look up in their cloud. */
const REGISTRABLE: readonly ExternalProvider[] = ["eks"];

const MAX_ID_LENGTH = 255;

function requiredRegion(details: Record<string, unknown>): string {
  const region = details.region;
  if (typeof region !== "string" || region === "") {
    throw badRequest(
      "providerDetails.region",
      "providerDetails.region is required for eks: the AWS region of the cluster",
    );
  }
  return region;
}

/**
 * Checks a registration against the body rules and the project's data: 400 for a malformed body
 * or an account of the wrong cloud, 404 for an unknown account, 409 for a cluster registered
 * already. Returns the normalised provider name and the region.
 */
export async function checkRegistration(
  db: Db,
  projectId: string,
  body: Registration,
): Promise<{ provider: ExternalProvider; region: string }> {
  if (body.id.trim() === "" || body.id.length > MAX_ID_LENGTH) {
    throw badRequest("id", `id must be the cluster's identifier at its provider, 1-${MAX_ID_LENGTH} characters`);
  }
  const provider = body.provider.toLowerCase();
  if (!Object.hasOwn(EXTERNAL_PROVIDERS, provider)) {
    throw badRequest("provider", `provider must be one of ${Object.keys(EXTERNAL_PROVIDERS).join(", ")}`);
  }
  if (!REGISTRABLE.includes(provider as ExternalProvider)) {
    throw badRequest(
      "provider",
      `${provider} clusters cannot be registered yet: Keelson looks clusters up in the cloud for ${REGISTRABLE.join(", ")} only`,
      "unsupported_provider",
    );
  }
  const cloudType = EXTERNAL_PROVIDERS[provider as ExternalProvider];
  const region = requiredRegion(body.providerDetails);
  const account = await getProvider(db, projectId, body.cloudProviderID);
  if (account.type !== cloudType) {
    throw badRequest(
      "cloudProviderID",
      `cloudProviderID must be a ${cloudType} account for a ${provider} cluster (it is ${account.type})`,
    );
  }
  await requireUnregistered(db, projectId, body.id);
  return { provider: provider as ExternalProvider, region };
}

async function requireUnregistered(db: Tx, projectId: string, externalId: string): Promise<void> {
  const existing = firstRow(
    await db
      .select({ id: externalClusters.id })
      .from(externalClusters)
      .where(and(eq(externalClusters.projectId, projectId), eq(externalClusters.externalId, externalId))),
  );
  if (existing) throw conflict(`external cluster ${externalId} is already registered`, "already_registered");
}

/**
 * Registers a cluster the cloud knows. The cloud is asked outside any transaction (a slow cloud
 * must not hold the store's write lock); a registration racing this one for the same id loses
 * on the unique index and gets the same 409.
 */
export async function registerExternalCluster(
  keelson: CloudKeelson,
  projectId: string,
  body: Registration,
): Promise<ExternalClusterRow> {
  const { provider, region } = await checkRegistration(keelson.db, projectId, body);
  const account = await storedAccount(keelson, body.cloudProviderID);
  const aws = await awsApi();
  if (!(await aws.listAwsRegions(account)).some((r) => r.RegionName === region)) {
    throw badRequest(
      "providerDetails.region",
      `providerDetails.region "${region.slice(0, 64)}" is not a region of this AWS account (EC2 DescribeRegions)`,
    );
  }
  const cluster = await aws.describeEksCluster(account, region, body.id);
  if (!cluster) throw notFound(`eks cluster in ${region}`, body.id);
  const row: ExternalClusterRow = {
    id: randomUUID(),
    projectId,
    externalId: body.id,
    provider,
    cloudProviderId: body.cloudProviderID,
    providerDetails: { ...body.providerDetails, region },
    agentReport: null,
    createdAt: new Date().toISOString(),
  };
  await keelson.db.transaction(async (tx) => {
    await requireUnregistered(tx, projectId, body.id);
    await tx.insert(externalClusters).values(row);
  });
  return row;
}

export async function listExternalClusters(db: Db, projectId: string): Promise<ExternalClusterRow[]> {
  return db.select().from(externalClusters).where(eq(externalClusters.projectId, projectId));
}

/** By Keelson's id or by the provider's cluster id, within the project. */
export async function findExternalCluster(db: Tx, projectId: string, clusterId: string): Promise<ExternalClusterRow> {
  const row = firstRow(
    await db
      .select()
      .from(externalClusters)
      .where(
        and(
          eq(externalClusters.projectId, projectId),
          or(eq(externalClusters.id, clusterId), eq(externalClusters.externalId, clusterId)),
        ),
      ),
  );
  if (!row) throw notFound("external cluster", clusterId);
  return row;
}
