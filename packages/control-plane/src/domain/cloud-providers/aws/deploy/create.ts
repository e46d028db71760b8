import {
  type AutoScalingGroupsType,
  CreateAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
  UpdateAutoScalingGroupCommand,
} from "@aws-sdk/client-auto-scaling";
import {
  type _InstanceType,
  AuthorizeSecurityGroupIngressCommand,
  CreateLaunchTemplateCommand,
  type CreateLaunchTemplateResult,
  CreateSecurityGroupCommand,
  type CreateSecurityGroupResult,
  CreateSubnetCommand,
  type CreateSubnetResult,
  CreateVpcCommand,
  type CreateVpcResult,
  DescribeLaunchTemplatesCommand,
  type DescribeLaunchTemplatesResult,
  DescribeSecurityGroupsCommand,
  type DescribeSecurityGroupsResult,
  DescribeSubnetsCommand,
  type DescribeSubnetsResult,
  DescribeVpcsCommand,
  type DescribeVpcsResult,
  type Reservation,
  RunInstancesCommand,
} from "@aws-sdk/client-ec2";
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  type CreateLoadBalancerOutput,
  CreateTargetGroupCommand,
  type CreateTargetGroupOutput,
  RegisterTargetsCommand,
} from "@aws-sdk/client-elastic-load-balancing-v2";
import { ChangeResourceRecordSetsCommand } from "@aws-sdk/client-route-53";
import {
  CLUSTER_TAG,
  clusterFilter,
  clusterTags,
  type DeployTarget,
  ROLE_TAG,
  send,
  shortName,
  tagSpec,
} from "./target.ts";

/**
 * The cloud half of an auto deploy on AWS, as steps an operation runs in order. Each step first
 * looks for what an earlier run of it made (by the cluster's tag, a name derived from the
 * cluster's uuid, or RunInstances' client token), creates only what is missing, and returns the
 * ids the later steps need, which the operation saves in its progress. A step cut off by a
 * crash is therefore simply run again.
 */
export interface AwsDeploySpec {
  azs: string[];
  numMasters: number;
  numWorkers: number;
  enableCAS: boolean;
  numMinWorkers: number;
  numMaxWorkers: number;
  /** An existing VPC and its subnets to use (nothing network-wide is created then). */
  vpc?: string;
  subnets?: string[];
  internalElb: boolean;
  k8sApiPort: number;
  imageId: string;
  masterFlavor: _InstanceType;
  workerFlavor: _InstanceType;
  /** The hosts' boot scripts (plain text; sent base64 as EC2 wants). */
  masterUserData: string;
  workerUserData: string;
  /** A record for the API load balancer. */
  dns?: { hostedZoneId: string; name: string };
}

export interface DeployState {
  vpcId?: string;
  subnetIds?: string[];
  securityGroupId?: string;
  templates?: { masters: string; workers: string };
  masterIds?: string[];
  groupName?: string;
  loadBalancerArn?: string;
  loadBalancerDns?: string;
}

type Step = (target: DeployTarget, spec: AwsDeploySpec, state: DeployState) => Promise<Partial<DeployState>>;

const ownFilter = (target: DeployTarget, role?: string) => [
  ...clusterFilter(target),
  ...(role ? [{ Name: `tag:${ROLE_TAG}`, Values: [role] }] : []),
];

async function network(target: DeployTarget, spec: AwsDeploySpec): Promise<Partial<DeployState>> {
  if (spec.vpc) return { vpcId: spec.vpc, subnetIds: spec.subnets ?? [] };
  const found = await send<DescribeVpcsResult>(target, "ec2", new DescribeVpcsCommand({ Filters: ownFilter(target) }));
  let vpcId = found?.Vpcs?.[0]?.VpcId;
  if (!vpcId) {
    const made = await send<CreateVpcResult>(
      target,
      "ec2",
      new CreateVpcCommand({ CidrBlock: "10.0.0.0/16", TagSpecifications: tagSpec(target, "vpc") }),
    );
    vpcId = made?.Vpc?.VpcId as string;
  }
  const have = await send<DescribeSubnetsResult>(
    target,
    "ec2",
    new DescribeSubnetsCommand({ Filters: [...ownFilter(target), { Name: "vpc-id", Values: [vpcId] }] }),
  );
  const subnetIds: string[] = [];
  for (const [i, az] of spec.azs.entries()) {
    let id = have?.Subnets?.find((s) => s.AvailabilityZone === az)?.SubnetId;
    if (!id) {
      const made = await send<CreateSubnetResult>(
        target,
        "ec2",
        new CreateSubnetCommand({
          VpcId: vpcId,
          AvailabilityZone: az,
          CidrBlock: `10.0.${i * 16}.0/20`,
          TagSpecifications: tagSpec(target, "subnet"),
        }),
      );
      id = made?.Subnet?.SubnetId as string;
    }
    subnetIds.push(id);
  }
  return { vpcId, subnetIds };
}

async function securityGroup(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  const vpcId = state.vpcId as string;
  const found = await send<DescribeSecurityGroupsResult>(
    target,
    "ec2",
    new DescribeSecurityGroupsCommand({ Filters: [...ownFilter(target), { Name: "vpc-id", Values: [vpcId] }] }),
  );
  let groupId = found?.SecurityGroups?.[0]?.GroupId;
  if (!groupId) {
    const made = await send<CreateSecurityGroupResult>(
      target,
      "ec2",
      new CreateSecurityGroupCommand({
        GroupName: `keelson-${target.clusterId}`,
        Description: `Keelson cluster ${target.clusterId}: its hosts`,
        VpcId: vpcId,
        TagSpecifications: tagSpec(target, "security-group"),
      }),
    );
    groupId = made?.GroupId as string;
  }
  // The API from outside, everything between the cluster's hosts. Run again, AWS says duplicate.
  await send(
    target,
    "ec2",
    new AuthorizeSecurityGroupIngressCommand({
      GroupId: groupId,
      IpPermissions: [
        { IpProtocol: "tcp", FromPort: spec.k8sApiPort, ToPort: spec.k8sApiPort, IpRanges: [{ CidrIp: "0.0.0.0/0" }] },
        { IpProtocol: "-1", UserIdGroupPairs: [{ GroupId: groupId }] },
      ],
    }),
    ["InvalidPermission.Duplicate"],
  );
  return { securityGroupId: groupId };
}

async function launchTemplates(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  const ids: Record<string, string> = {};
  for (const role of ["masters", "workers"] as const) {
    const found = await send<DescribeLaunchTemplatesResult>(
      target,
      "ec2",
      new DescribeLaunchTemplatesCommand({ Filters: ownFilter(target, role) }),
    );
    let id = found?.LaunchTemplates?.[0]?.LaunchTemplateId;
    if (!id) {
      const made = await send<CreateLaunchTemplateResult>(
        target,
        "ec2",
        new CreateLaunchTemplateCommand({
          LaunchTemplateName: shortName(target, role),
          LaunchTemplateData: {
            ImageId: spec.imageId,
            InstanceType: role === "masters" ? spec.masterFlavor : spec.workerFlavor,
            SecurityGroupIds: [state.securityGroupId as string],
            UserData: Buffer.from(role === "masters" ? spec.masterUserData : spec.workerUserData).toString("base64"),
          },
          TagSpecifications: tagSpec(target, "launch-template", role),
        }),
      );
      id = made?.LaunchTemplate?.LaunchTemplateId as string;
    }
    ids[role] = id;
  }
  return { templates: { masters: ids.masters as string, workers: ids.workers as string } };
}

/** One RunInstances per master, across the zones; the client token makes a re-run return the same instance. */
async function masters(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  const subnets = state.subnetIds as string[];
  const masterIds: string[] = [];
  for (let i = 0; i < spec.numMasters; i++) {
    const run = await send<Reservation>(
      target,
      "ec2",
      new RunInstancesCommand({
        MinCount: 1,
        MaxCount: 1,
        ClientToken: `${target.clusterId}-master-${i}`,
        SubnetId: subnets[i % subnets.length],
        LaunchTemplate: { LaunchTemplateId: state.templates?.masters },
        TagSpecifications: tagSpec(target, "instance", "masters"),
      }),
    );
    masterIds.push(run?.Instances?.[0]?.InstanceId as string);
  }
  return { masterIds };
}

/** The group's sizes: fixed at numWorkers, or the autoscaler's bounds. */
/** The worker Auto Scaling group of a cluster: one per cluster, found again by this name. */
export const workerGroupName = (clusterId: string) => `keelson-${clusterId}-workers`;

export function workerSizes(spec: Pick<AwsDeploySpec, "enableCAS" | "numWorkers" | "numMinWorkers" | "numMaxWorkers">) {
  if (!spec.enableCAS) return { MinSize: spec.numWorkers, MaxSize: spec.numWorkers, DesiredCapacity: spec.numWorkers };
  const desired = Math.min(Math.max(spec.numWorkers, spec.numMinWorkers), spec.numMaxWorkers);
  return { MinSize: spec.numMinWorkers, MaxSize: spec.numMaxWorkers, DesiredCapacity: desired };
}

async function workerGroup(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  const name = workerGroupName(target.clusterId);
  const found = await send<AutoScalingGroupsType>(
    target,
    "autoscaling",
    new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [name] }),
  );
  if (!found?.AutoScalingGroups?.length) {
    await send(
      target,
      "autoscaling",
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: name,
        LaunchTemplate: { LaunchTemplateId: state.templates?.workers },
        VPCZoneIdentifier: (state.subnetIds as string[]).join(","),
        ...workerSizes(spec),
        Tags: clusterTags(target, "workers").map((t) => ({ ...t, PropagateAtLaunch: true })),
      }),
      ["AlreadyExists"],
    );
  }
  return { groupName: name };
}

/** ELBv2 answers a create of an existing load balancer, target group or listener (same settings) with it. */
async function apiLoadBalancer(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  const lb = await send<CreateLoadBalancerOutput>(
    target,
    "elbv2",
    new CreateLoadBalancerCommand({
      Name: shortName(target, "api"),
      Type: "network",
      Scheme: spec.internalElb ? "internal" : "internet-facing",
      Subnets: state.subnetIds,
      Tags: clusterTags(target),
    }),
  );
  const tg = await send<CreateTargetGroupOutput>(
    target,
    "elbv2",
    new CreateTargetGroupCommand({
      Name: shortName(target, "api"),
      Protocol: "TCP",
      Port: spec.k8sApiPort,
      VpcId: state.vpcId,
      TargetType: "instance",
      Tags: clusterTags(target),
    }),
  );
  const loadBalancerArn = lb?.LoadBalancers?.[0]?.LoadBalancerArn as string;
  const targetGroupArn = tg?.TargetGroups?.[0]?.TargetGroupArn as string;
  await send(
    target,
    "elbv2",
    new RegisterTargetsCommand({
      TargetGroupArn: targetGroupArn,
      Targets: (state.masterIds ?? []).map((Id) => ({ Id })),
    }),
  );
  await send(
    target,
    "elbv2",
    new CreateListenerCommand({
      LoadBalancerArn: loadBalancerArn,
      Protocol: "TCP",
      Port: spec.k8sApiPort,
      DefaultActions: [{ Type: "forward", TargetGroupArn: targetGroupArn }],
    }),
  );
  return { loadBalancerArn, loadBalancerDns: lb?.LoadBalancers?.[0]?.DNSName as string };
}

async function dnsRecord(target: DeployTarget, spec: AwsDeploySpec, state: DeployState) {
  if (!spec.dns) return {};
  await send(
    target,
    "route53",
    new ChangeResourceRecordSetsCommand({
      HostedZoneId: spec.dns.hostedZoneId,
      ChangeBatch: {
        Comment: `${CLUSTER_TAG}=${target.clusterId}`,
        Changes: [
          {
            Action: "UPSERT",
            ResourceRecordSet: {
              Name: spec.dns.name,
              Type: "CNAME",
              TTL: 60,
              ResourceRecords: [{ Value: state.loadBalancerDns as string }],
            },
          },
        ],
      },
    }),
  );
  return {};
}

/** The steps in order, by the names an operation's cursor records. */
export const DEPLOY_STEPS: readonly (readonly [string, Step])[] = [
  ["aws-network", network],
  ["aws-security-group", securityGroup],
  ["aws-launch-templates", launchTemplates],
  ["aws-masters", masters],
  ["aws-worker-group", workerGroup],
  ["aws-api-load-balancer", apiLoadBalancer],
  ["aws-dns-record", dnsRecord],
];

/** Runs every step from `state` on (a plain loop; an operation runs them as its own steps). */
export async function deployAll(
  target: DeployTarget,
  spec: AwsDeploySpec,
  state: DeployState = {},
): Promise<DeployState> {
  let current = { ...state };
  for (const [, step] of DEPLOY_STEPS) current = { ...current, ...(await step(target, spec, current)) };
  return current;
}

/** Resizes the worker group (numWorkers without the autoscaler, its bounds with it). */
export async function resizeWorkers(
  target: DeployTarget,
  spec: Pick<AwsDeploySpec, "enableCAS" | "numWorkers" | "numMinWorkers" | "numMaxWorkers">,
): Promise<void> {
  await send(
    target,
    "autoscaling",
    new UpdateAutoScalingGroupCommand({
      AutoScalingGroupName: workerGroupName(target.clusterId),
      ...workerSizes(spec),
    }),
  );
}
