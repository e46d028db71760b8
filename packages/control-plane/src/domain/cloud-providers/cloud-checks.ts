import type { Keelson } from "../../context.ts";
import { badRequest } from "../../http/errors.ts";
import type { AwsAccount } from "./aws/clients.ts";
import { awsApi } from "./aws/load.ts";
import type { RegionDetail } from "./aws/region-detail.ts";
import { azureApi } from "./azure/load.ts";
import { getProvider, storedCredentials } from "./cloud-providers.ts";
import type { Credentials } from "./credentials.ts";
import { gcpApi } from "./gcp/load.ts";
import type { ProviderType } from "./provider-types.ts";
import { noRegions, type Region } from "./regions.ts";
import { parseSshPublicKey } from "./ssh-public-key.ts";

/**
 * The calls into a provider's cloud, by provider type, each through that cloud's own SDK, loaded
 * on first use: AWS (aws/), Azure (azure/), GCP (gcp/). Region detail and key upload are served
 * for AWS only; for the others they are refused with a 400 that names the type that has them.
 */
type CloudType = Exclude<ProviderType, "local">;

/**
 * Whether the cloud accepts the credentials: 400 when it refuses them, 503 when it cannot be
 * asked. On Azure and GCP with a client of its own, so the token is asked for (client-cache.ts).
 */
export async function verifyWithCloud(
  keelson: Pick<Keelson, "settings" | "cloudClients">,
  type: CloudType,
  credentials: Credentials,
): Promise<void> {
  if (type === "aws")
    await (await awsApi()).checkAwsCredentials({
      settings: keelson.settings,
      credentials,
      clients: keelson.cloudClients,
    });
  else if (type === "azure") await (await azureApi()).checkAzureCredentials(keelson.settings, credentials);
  else await (await gcpApi()).checkGcpCredentials(keelson.settings, credentials);
}

export type CloudKeelson = Pick<Keelson, "db" | "cipher" | "settings" | "cloudClients">;

/** A stored AWS account as the AWS calls need it (its credentials decrypted, the server's kept clients). */
export async function storedAccount(keelson: CloudKeelson, id: string): Promise<AwsAccount> {
  return {
    settings: keelson.settings,
    credentials: await storedCredentials(keelson, id),
    clients: keelson.cloudClients,
  };
}

/** The account as the AWS calls need it; 400 for any other type (`what` names the request). */
async function awsAccountOf(keelson: CloudKeelson, projectId: string, id: string, what: string): Promise<AwsAccount> {
  const provider = await getProvider(keelson.db, projectId, id);
  if (provider.type !== "aws") {
    const reason =
      provider.type === "local" ? "the local provider has no cloud" : `not for ${provider.type} accounts yet`;
    throw badRequest("uuid", `${what} is served for aws accounts only: ${reason}`, "unsupported_provider");
  }
  return storedAccount(keelson, id);
}

export async function providerRegions(keelson: CloudKeelson, projectId: string, id: string): Promise<Region[]> {
  const provider = await getProvider(keelson.db, projectId, id);
  if (provider.type === "aws") return (await awsApi()).listAwsRegions(await storedAccount(keelson, id));
  const kept = { clients: keelson.cloudClients, accountId: id };
  if (provider.type === "azure") {
    return (await azureApi()).listAzureRegions(keelson.settings, await storedCredentials(keelson, id), kept);
  }
  if (provider.type === "gcp")
    return (await gcpApi()).listGcpRegions(keelson.settings, await storedCredentials(keelson, id), kept);
  return noRegions(provider.type);
}

export async function providerRegionDetail(
  keelson: CloudKeelson,
  projectId: string,
  id: string,
  regionId: string,
): Promise<RegionDetail> {
  const account = await awsAccountOf(keelson, projectId, id, "region detail");
  const aws = await awsApi();
  await aws.requireAwsRegion(account, regionId);
  return aws.awsRegionDetail(account, regionId);
}

/** Key pair names EC2 accepts: up to 255 ASCII characters. */
const KEY_NAME = /^[\x20-\x7e]{1,255}$/;

export async function uploadSshKey(
  keelson: CloudKeelson,
  projectId: string,
  id: string,
  regionId: string,
  body: { name: string; key: string },
): Promise<void> {
  parseSshPublicKey(body.key);
  if (!KEY_NAME.test(body.name) || body.name.trim() === "") {
    throw badRequest("name", "name must be 1-255 printable ASCII characters (EC2's rule for key pair names)");
  }
  const account = await awsAccountOf(keelson, projectId, id, "SSH key upload");
  const aws = await awsApi();
  await aws.requireAwsRegion(account, regionId);
  await aws.importAwsKeyPair(account, regionId, body.name, body.key.trim());
}
