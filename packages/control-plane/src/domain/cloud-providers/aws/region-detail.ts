import {
  DescribeAvailabilityZonesCommand,
  DescribeImagesCommand,
  DescribeInstanceTypesCommand,
  DescribeKeyPairsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type EC2Client,
  type InstanceTypeInfo,
} from "@aws-sdk/client-ec2";
import { type HostedZone, ListHostedZonesCommand, type Route53Client } from "@aws-sdk/client-route-53";
import { type AwsAccount, awsCall, ec2Client, route53Client } from "./clients.ts";
import { SUPPORTED_IMAGES, supportedImageOf } from "./images.ts";

/**
 * Region detail of an AWS account (spec §2.3): six arrays, each from the AWS API that owns it,
 * fetched concurrently (every call under its own time limit): availability zones, the account's
 * Route 53 hosted zones (`domains`; global, the same for every region), instance types
 * (`flavors`, every page), key pairs, the newest image of each supported OS (`operatingSystems`)
 * and the VPCs with their subnets. The region must be one the account has (account.ts).
 */
export interface RegionDetail {
  azs: { name: string; zoneId: string; state: string }[];
  domains: { id: string; name: string; private: boolean }[];
  flavors: { name: string; vcpus: number; memoryMiB: number; architectures: string[] }[];
  keyPairs: { name: string; fingerprint: string; type: string }[];
  operatingSystems: { os: string; architecture: string; imageId: string; imageName: string; created: string }[];
  vpcs: {
    id: string;
    name: string;
    cidrBlock: string;
    isDefault: boolean;
    subnets: { id: string; cidrBlock: string; az: string; public: boolean }[];
  }[];
}

/** DescribeInstanceTypes answers at most 100 a page. */
const INSTANCE_TYPE_PAGE = 100;

async function flavorsOf(account: AwsAccount, ec2: EC2Client, region: string): Promise<RegionDetail["flavors"]> {
  const types: InstanceTypeInfo[] = [];
  let nextToken: string | undefined;
  do {
    const page = await awsCall(
      account.settings,
      `the instance types (EC2 DescribeInstanceTypes in ${region})`,
      (abortSignal) =>
        ec2.send(new DescribeInstanceTypesCommand({ MaxResults: INSTANCE_TYPE_PAGE, NextToken: nextToken }), {
          abortSignal,
        }),
    );
    types.push(...(page.InstanceTypes ?? []));
    nextToken = page.NextToken || undefined;
  } while (nextToken);
  return types
    .map((t) => ({
      name: t.InstanceType ?? "",
      vcpus: t.VCpuInfo?.DefaultVCpus ?? 0,
      memoryMiB: t.MemoryInfo?.SizeInMiB ?? 0,
      architectures: t.ProcessorInfo?.SupportedArchitectures ?? [],
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

async function domainsOf(account: AwsAccount, route53: Route53Client): Promise<RegionDetail["domains"]> {
  const zones: HostedZone[] = [];
  let marker: string | undefined;
  do {
    const page = await awsCall(account.settings, "the hosted zones (Route 53 ListHostedZones)", (abortSignal) =>
      route53.send(new ListHostedZonesCommand({ Marker: marker }), { abortSignal }),
    );
    zones.push(...(page.HostedZones ?? []));
    marker = page.IsTruncated ? page.NextMarker : undefined;
  } while (marker);
  return zones.map((z) => ({
    id: (z.Id ?? "").replace(/^\/hostedzone\//, ""),
    name: (z.Name ?? "").replace(/\.$/, ""),
    private: z.Config?.PrivateZone ?? false,
  }));
}

async function operatingSystemsOf(
  account: AwsAccount,
  ec2: EC2Client,
  region: string,
): Promise<RegionDetail["operatingSystems"]> {
  const answer = await awsCall(account.settings, `the images (EC2 DescribeImages in ${region})`, (abortSignal) =>
    ec2.send(
      new DescribeImagesCommand({
        Owners: [...new Set(SUPPORTED_IMAGES.map((i) => i.owner))],
        Filters: [
          { Name: "name", Values: SUPPORTED_IMAGES.map((i) => i.pattern) },
          { Name: "state", Values: ["available"] },
        ],
      }),
      { abortSignal },
    ),
  );
  const newest = new Map<string, RegionDetail["operatingSystems"][number]>();
  for (const image of answer.Images ?? []) {
    const supported = supportedImageOf(image.OwnerId ?? "", image.Name ?? "");
    if (!supported || !image.ImageId) continue;
    const entry = {
      os: supported.os,
      architecture: image.Architecture ?? "",
      imageId: image.ImageId,
      imageName: image.Name ?? "",
      created: image.CreationDate ?? "",
    };
    const key = `${entry.os}/${entry.architecture}`;
    const seen = newest.get(key);
    if (!seen || seen.created < entry.created) newest.set(key, entry);
  }
  return [...newest.values()].sort((a, b) => `${a.os}/${a.architecture}`.localeCompare(`${b.os}/${b.architecture}`));
}

async function vpcsOf(account: AwsAccount, ec2: EC2Client, region: string): Promise<RegionDetail["vpcs"]> {
  const [vpcs, subnets] = await Promise.all([
    awsCall(account.settings, `the VPCs (EC2 DescribeVpcs in ${region})`, (abortSignal) =>
      ec2.send(new DescribeVpcsCommand({}), { abortSignal }),
    ),
    awsCall(account.settings, `the subnets (EC2 DescribeSubnets in ${region})`, (abortSignal) =>
      ec2.send(new DescribeSubnetsCommand({}), { abortSignal }),
    ),
  ]);
  return (vpcs.Vpcs ?? []).map((vpc) => ({
    id: vpc.VpcId ?? "",
    name: vpc.Tags?.find((t) => t.Key === "Name")?.Value ?? "",
    cidrBlock: vpc.CidrBlock ?? "",
    isDefault: vpc.IsDefault ?? false,
    subnets: (subnets.Subnets ?? [])
      .filter((s) => s.VpcId === vpc.VpcId)
      .map((s) => ({
        id: s.SubnetId ?? "",
        cidrBlock: s.CidrBlock ?? "",
        az: s.AvailabilityZone ?? "",
        public: s.MapPublicIpOnLaunch ?? false,
      })),
  }));
}

/** The account's Route 53 hosted zones (the region detail's `domains`; Route 53 is global). */
export async function awsHostedZones(account: AwsAccount): Promise<RegionDetail["domains"]> {
  const lease = route53Client(account);
  try {
    return await domainsOf(account, lease.client);
  } finally {
    lease.release();
  }
}

export async function awsRegionDetail(account: AwsAccount, region: string): Promise<RegionDetail> {
  const ec2Lease = ec2Client(account, region);
  const route53Lease = route53Client(account);
  const ec2 = ec2Lease.client;
  const route53 = route53Lease.client;
  try {
    const [zones, domains, flavors, keyPairs, operatingSystems, vpcs] = await Promise.all([
      awsCall(account.settings, `the availability zones (EC2 DescribeAvailabilityZones in ${region})`, (abortSignal) =>
        ec2.send(new DescribeAvailabilityZonesCommand({}), { abortSignal }),
      ),
      domainsOf(account, route53),
      flavorsOf(account, ec2, region),
      awsCall(account.settings, `the key pairs (EC2 DescribeKeyPairs in ${region})`, (abortSignal) =>
        ec2.send(new DescribeKeyPairsCommand({}), { abortSignal }),
      ),
      operatingSystemsOf(account, ec2, region),
      vpcsOf(account, ec2, region),
    ]);
    return {
      azs: (zones.AvailabilityZones ?? []).map((z) => ({
        name: z.ZoneName ?? "",
        zoneId: z.ZoneId ?? "",
        state: z.State ?? "",
      })),
      domains,
      flavors,
      keyPairs: (keyPairs.KeyPairs ?? []).map((k) => ({
        name: k.KeyName ?? "",
        fingerprint: k.KeyFingerprint ?? "",
        type: k.KeyType ?? "",
      })),
      operatingSystems,
      vpcs,
    };
  } finally {
    ec2Lease.release();
    route53Lease.release();
  }
}
