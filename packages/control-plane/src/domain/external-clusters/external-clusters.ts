import { type Db, externalClusters, firstRow } from "@keelson/db";
import { and, eq, or } from "drizzle-orm";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import { getProvider } from "../cloud-providers/cloud-providers.ts";
import { regionsOf } from "../cloud-providers/regions.ts";

/**
 * External (third-party-hosted) clusters, spec §2.5 and §4.2. Discovering, registering and
 * deregistering them talks to the clouds, which needs cloud drivers this server does not have;
 * what can be decided from the database alone is decided here (400, 404, 409), so those
 * answers hold whatever a driver later adds.
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

const MAX_ID_LENGTH = 255;

function checkRegion(cloudType: string, details: Record<string, unknown>, required: boolean): void {
  const region = details.region;
  if (region === undefined && !required) return;
  if (typeof region !== "string" || region === "") {
    throw badRequest(
      "providerDetails.region",
      "providerDetails.region is required for eks: the AWS region of the cluster",
    );
  }
  if (!regionsOf(cloudType).some((r) => r.RegionName === region)) {
    throw badRequest(
      "providerDetails.region",
      `providerDetails.region "${region.slice(0, 64)}" is not a ${cloudType} region`,
    );
  }
}

/**
 * Checks a registration against the body rules and the project's data: 400 for a malformed body
 * or an account of the wrong cloud, 404 for an unknown account, 409 for a cluster registered
 * already. Returns the normalised provider name.
 */
export async function checkRegistration(db: Db, projectId: string, body: Registration): Promise<ExternalProvider> {
  if (body.id.trim() === "" || body.id.length > MAX_ID_LENGTH) {
    throw badRequest("id", `id must be the cluster's identifier at its provider, 1-${MAX_ID_LENGTH} characters`);
  }
  const provider = body.provider.toLowerCase();
  if (!Object.hasOwn(EXTERNAL_PROVIDERS, provider)) {
    throw badRequest("provider", `provider must be one of ${Object.keys(EXTERNAL_PROVIDERS).join(", ")}`);
  }
  const cloudType = EXTERNAL_PROVIDERS[provider as ExternalProvider];
  checkRegion(cloudType, body.providerDetails, provider === "eks");
  const account = await getProvider(db, projectId, body.cloudProviderID);
  if (account.type !== cloudType) {
    throw badRequest(
      "cloudProviderID",
      `cloudProviderID must be a ${cloudType} account for a ${provider} cluster (it is ${account.type})`,
    );
  }
  const existing = firstRow(
    await db
      .select({ id: externalClusters.id })
      .from(externalClusters)
      .where(and(eq(externalClusters.projectId, projectId), eq(externalClusters.externalId, body.id))),
  );
  if (existing) throw conflict(`external cluster ${body.id} is already registered`, "already_registered");
  return provider as ExternalProvider;
}

/** By Keelson's id or by the provider's cluster id, within the project. */
export async function findExternalCluster(db: Db, projectId: string, clusterId: string): Promise<ExternalClusterRow> {
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
