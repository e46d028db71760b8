import type { _InstanceType } from "@aws-sdk/client-ec2";
import { badRequest } from "../../../http/errors.ts";
import type { AwsDeploySpec } from "../../cloud-providers/aws/deploy/create.ts";
import type { ClusterSpec } from "../spec/fields.ts";

/**
 * What an auto deploy on AWS needs of the cluster spec (§2.1) beyond the field rules every
 * cluster has (spec/rules.ts): checked at create, each missing or unusable field a 400 naming
 * it; and the spec turned into the cloud steps' plan.
 */
const REQUIRED = ["region", "ami", "masterFlavor", "workerFlavor"] as const;

/** EC2's own shapes: ids and instance types as EC2 writes them. */
const SHAPES: Partial<Record<keyof ClusterSpec, [RegExp, string]>> = {
  ami: [/^ami-[0-9a-f]{8,17}$/, "an EC2 image id such as ami-0abcdef1234567890"],
  masterFlavor: [/^[a-z][a-z0-9-]*\.[a-z0-9]+$/, "an EC2 instance type such as m5.large"],
  workerFlavor: [/^[a-z][a-z0-9-]*\.[a-z0-9]+$/, "an EC2 instance type such as m5.large"],
  vpc: [/^vpc-[0-9a-f]{8,17}$/, "an EC2 VPC id such as vpc-0abc1234"],
};
const SUBNET = /^subnet-[0-9a-f]{8,17}$/;

export function checkAwsCreate(spec: ClusterSpec, namedNodes: number): void {
  if (namedNodes > 0) {
    throw badRequest(
      "masterNodes",
      "an auto-deploy cluster's nodes are the instances it launches: masterNodes and workerNodes are for manual deploy",
      "auto_deploy_nodes",
    );
  }
  for (const field of REQUIRED) {
    if (!spec[field]) throw badRequest(field, `${field} is required for a cluster on an AWS node pool`);
  }
  for (const [field, [shape, what]] of Object.entries(SHAPES)) {
    const value = spec[field as keyof ClusterSpec];
    if (typeof value === "string" && !shape.test(value)) {
      throw badRequest(field, `${field} must be ${what} (got "${value}")`);
    }
  }
  if (!spec.azs?.length) throw badRequest("azs", "azs is required for a cluster on an AWS node pool: one zone or more");
  for (const [i, az] of spec.azs.entries()) {
    if (!az.startsWith(spec.region as string)) {
      throw badRequest(`azs[${i}]`, `availability zone ${az} is not a zone of region ${spec.region}`);
    }
  }
  if (!spec.numMasters || spec.numMasters < 1) {
    throw badRequest("numMasters", "numMasters must be at least 1 for a cluster on an AWS node pool");
  }
  for (const field of ["subnets", "privateSubnets"] as const) {
    for (const [i, id] of (spec[field] ?? []).entries()) {
      if (!SUBNET.test(id))
        throw badRequest(`${field}[${i}]`, `${field}[${i}] must be a subnet id such as subnet-0abc1234`);
    }
  }
  if (spec.vpc && !spec.subnets?.length) {
    throw badRequest("subnets", "subnets is required when vpc is given: the subnets of that VPC the hosts go in");
  }
}

/** The cloud steps' plan from the stored spec; the user data carries the cluster's join token. */
export function awsDeploySpec(spec: ClusterSpec, userData: string): AwsDeploySpec {
  const numWorkers = spec.numWorkers ?? 0;
  return {
    azs: spec.azs ?? [],
    numMasters: spec.numMasters ?? 1,
    numWorkers,
    enableCAS: spec.enableCAS === true,
    numMinWorkers: spec.numMinWorkers ?? numWorkers,
    numMaxWorkers: spec.numMaxWorkers ?? numWorkers,
    ...(spec.vpc
      ? { vpc: spec.vpc, subnets: spec.isPrivate ? (spec.privateSubnets ?? spec.subnets) : spec.subnets }
      : {}),
    internalElb: spec.internalElb === true,
    k8sApiPort: Number(spec.k8sApiPort ?? 443),
    imageId: spec.ami as string,
    masterFlavor: spec.masterFlavor as _InstanceType,
    workerFlavor: spec.workerFlavor as _InstanceType,
    masterUserData: userData,
    workerUserData: userData,
    ...(spec.externalDnsName && spec.domainId
      ? { dns: { hostedZoneId: spec.domainId, name: spec.externalDnsName } }
      : {}),
  };
}
