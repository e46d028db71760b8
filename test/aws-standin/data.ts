/**
 * STAND-IN, for tests: what the AWS stand-in's one account holds at start, per region. Small,
 * but shaped like a real account: a default VPC with one subnet per zone and a VPC of its own,
 * the public images of Canonical and Debian (two Ubuntu 24.04 builds, so "the newest" is tested)
 * beside one Keelson does not support, and over a hundred instance types, so that
 * DescribeInstanceTypes takes two pages as it does on AWS.
 */
/** The one account the stand-in serves. */
export const STANDIN_ACCOUNT_ID = "123456789012";

export const STANDIN_REGIONS = ["us-east-1", "us-west-2", "eu-central-1"] as const;

export const CANONICAL_OWNER = "099720109477";
export const DEBIAN_OWNER = "136693071363";
const AMAZON_OWNER = "801119661308";

export interface Image {
  imageId: string;
  name: string;
  ownerId: string;
  architecture: string;
  creationDate: string;
  description: string;
}

export interface Vpc {
  vpcId: string;
  cidrBlock: string;
  isDefault: boolean;
  name?: string;
}

export interface Subnet {
  subnetId: string;
  vpcId: string;
  cidrBlock: string;
  availabilityZone: string;
  mapPublicIpOnLaunch: boolean;
}

export interface InstanceType {
  instanceType: string;
  vcpus: number;
  memoryMiB: number;
  architecture: "x86_64" | "arm64";
}

export interface HostedZone {
  id: string;
  name: string;
  privateZone: boolean;
}

const SIZES: [string, number][] = [
  ["large", 2],
  ["xlarge", 4],
  ["2xlarge", 8],
  ["4xlarge", 16],
  ["8xlarge", 32],
  ["12xlarge", 48],
  ["16xlarge", 64],
  ["24xlarge", 96],
];
/** Family, GiB per vCPU, architecture. */
const FAMILIES: [string, number, InstanceType["architecture"]][] = [
  ["m5", 4, "x86_64"],
  ["m5a", 4, "x86_64"],
  ["c5", 2, "x86_64"],
  ["r5", 8, "x86_64"],
  ["m6i", 4, "x86_64"],
  ["c6i", 2, "x86_64"],
  ["r6i", 8, "x86_64"],
  ["m7i", 4, "x86_64"],
  ["c7i", 2, "x86_64"],
  ["r7i", 8, "x86_64"],
  ["m6g", 4, "arm64"],
  ["c6g", 2, "arm64"],
];
const BURSTABLE: [string, number, number][] = [
  ["nano", 2, 512],
  ["micro", 2, 1024],
  ["small", 2, 2048],
  ["medium", 2, 4096],
  ["large", 2, 8192],
  ["xlarge", 4, 16384],
  ["2xlarge", 8, 32768],
];

export const INSTANCE_TYPES: InstanceType[] = [
  ...["t3", "t3a"].flatMap((family) =>
    BURSTABLE.map(([size, vcpus, memoryMiB]) => ({
      instanceType: `${family}.${size}`,
      vcpus,
      memoryMiB,
      architecture: "x86_64" as const,
    })),
  ),
  ...FAMILIES.flatMap(([family, gibPerCpu, architecture]) =>
    SIZES.map(([size, vcpus]) => ({
      instanceType: `${family}.${size}`,
      vcpus,
      memoryMiB: vcpus * gibPerCpu * 1024,
      architecture,
    })),
  ),
];

export function zonesOf(region: string): string[] {
  return ["a", "b", "c"].map((letter) => `${region}${letter}`);
}

/** A short, stable per-region tag for ids, so ids differ between regions. */
function tag(region: string): string {
  return (STANDIN_REGIONS.indexOf(region as (typeof STANDIN_REGIONS)[number]) + 1).toString(16).padStart(2, "0");
}

export function imagesOf(region: string): Image[] {
  const t = tag(region);
  return [
    {
      imageId: `ami-0${t}00000000000a1`,
      name: "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20250115",
      ownerId: CANONICAL_OWNER,
      architecture: "x86_64",
      creationDate: "2025-01-15T10:00:00.000Z",
      description: "Canonical, Ubuntu, 24.04, amd64 noble image",
    },
    {
      imageId: `ami-0${t}00000000000a2`,
      name: "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20250610",
      ownerId: CANONICAL_OWNER,
      architecture: "x86_64",
      creationDate: "2025-06-10T10:00:00.000Z",
      description: "Canonical, Ubuntu, 24.04, amd64 noble image",
    },
    {
      imageId: `ami-0${t}00000000000b1`,
      name: "ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-20250401",
      ownerId: CANONICAL_OWNER,
      architecture: "x86_64",
      creationDate: "2025-04-01T10:00:00.000Z",
      description: "Canonical, Ubuntu, 22.04 LTS, amd64 jammy image",
    },
    {
      imageId: `ami-0${t}00000000000c1`,
      name: "debian-12-amd64-20250520-2120",
      ownerId: DEBIAN_OWNER,
      architecture: "x86_64",
      creationDate: "2025-05-20T21:20:00.000Z",
      description: "Debian 12 (20250520-2120)",
    },
    {
      imageId: `ami-0${t}00000000000d1`,
      name: "Windows_Server-2022-English-Full-Base-2025.06.11",
      ownerId: AMAZON_OWNER,
      architecture: "x86_64",
      creationDate: "2025-06-11T00:00:00.000Z",
      description: "Microsoft Windows Server 2022",
    },
  ];
}

export function vpcsOf(region: string): { vpcs: Vpc[]; subnets: Subnet[] } {
  const t = tag(region);
  const defaultVpc = `vpc-0${t}0000000000def`;
  const ownVpc = `vpc-0${t}00000000000aa`;
  return {
    vpcs: [
      { vpcId: defaultVpc, cidrBlock: "172.31.0.0/16", isDefault: true },
      { vpcId: ownVpc, cidrBlock: "10.0.0.0/16", isDefault: false, name: "platform" },
    ],
    subnets: [
      ...zonesOf(region).map((zone, i) => ({
        subnetId: `subnet-0${t}000000000d${i}`,
        vpcId: defaultVpc,
        cidrBlock: `172.31.${i * 16}.0/20`,
        availabilityZone: zone,
        mapPublicIpOnLaunch: true,
      })),
      {
        subnetId: `subnet-0${t}0000000000a1`,
        vpcId: ownVpc,
        cidrBlock: "10.0.1.0/24",
        availabilityZone: zonesOf(region)[0] as string,
        mapPublicIpOnLaunch: true,
      },
      {
        subnetId: `subnet-0${t}0000000000a2`,
        vpcId: ownVpc,
        cidrBlock: "10.0.2.0/24",
        availabilityZone: zonesOf(region)[1] as string,
        mapPublicIpOnLaunch: false,
      },
    ],
  };
}

export const HOSTED_ZONES: HostedZone[] = [
  { id: "/hostedzone/Z0STANDIN00PUBLIC", name: "example.com.", privateZone: false },
  { id: "/hostedzone/Z0STANDIN0PRIVATE", name: "internal.example.", privateZone: true },
];
