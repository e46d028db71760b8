import { DescribeRegionsCommand, ImportKeyPairCommand } from "@aws-sdk/client-ec2";
import { GetCallerIdentityCommand } from "@aws-sdk/client-sts";
import { ApiError, notFound } from "../../../http/errors.ts";
import type { Region } from "../regions.ts";
import { type AwsAccount, awsCall, ec2Client, GLOBAL_REGION, stsClient } from "./clients.ts";
import { awsErrorCode } from "./errors.ts";

/**
 * The account-level AWS calls: whether AWS accepts the credentials (STS GetCallerIdentity, which
 * needs no permission at all, so a working key never fails it), the account's regions (EC2
 * DescribeRegions: only those enabled for it) and importing an SSH key into a region.
 * Clients come from the server's cache when the account carries one (client-cache.ts).
 */
export async function checkAwsCredentials(account: AwsAccount): Promise<{ accountId: string }> {
  const sts = stsClient(account);
  try {
    const identity = await awsCall(account.settings, "the credential check (STS GetCallerIdentity)", (abortSignal) =>
      sts.client.send(new GetCallerIdentityCommand({}), { abortSignal }),
    );
    return { accountId: identity.Account ?? "" };
  } finally {
    sts.release();
  }
}

export async function listAwsRegions(account: AwsAccount): Promise<Region[]> {
  const ec2 = ec2Client(account, GLOBAL_REGION);
  try {
    const answer = await awsCall(account.settings, "the region list (EC2 DescribeRegions)", (abortSignal) =>
      ec2.client.send(new DescribeRegionsCommand({}), { abortSignal }),
    );
    return (answer.Regions ?? [])
      .map((r) => ({ RegionName: r.RegionName ?? "", Endpoint: r.Endpoint ?? "" }))
      .filter((r) => r.RegionName !== "")
      .sort((a, b) => a.RegionName.localeCompare(b.RegionName));
  } finally {
    ec2.release();
  }
}

/** The region as the account knows it: 404 for one it does not have (or has not enabled). */
export async function requireAwsRegion(account: AwsAccount, regionId: string): Promise<Region> {
  const region = (await listAwsRegions(account)).find((r) => r.RegionName === regionId);
  if (!region) throw notFound("aws region", regionId);
  return region;
}

/** EC2 ImportKeyPair; the name is the key pair's name in that region, a duplicate is a 409. */
export async function importAwsKeyPair(account: AwsAccount, region: string, name: string, key: string): Promise<void> {
  const ec2 = ec2Client(account, region);
  try {
    await awsCall(account.settings, `the key import (EC2 ImportKeyPair in ${region})`, (abortSignal) =>
      ec2.client
        .send(new ImportKeyPairCommand({ KeyName: name, PublicKeyMaterial: Buffer.from(key) }), { abortSignal })
        .catch((err: unknown) => {
          if (awsErrorCode(err) === "InvalidKeyPair.Duplicate") {
            throw new ApiError(409, "duplicate_name", `a key pair named "${name}" already exists in ${region}`);
          }
          throw err;
        }),
    );
  } finally {
    ec2.release();
  }
}
