import { DeleteAutoScalingGroupCommand } from "@aws-sdk/client-auto-scaling";
import {
  DeleteLaunchTemplateCommand,
  DeleteSecurityGroupCommand,
  DeleteSubnetCommand,
  DeleteVpcCommand,
  DescribeInstancesCommand,
  type DescribeInstancesResult,
  DescribeLaunchTemplatesCommand,
  type DescribeLaunchTemplatesResult,
  DescribeSecurityGroupsCommand,
  type DescribeSecurityGroupsResult,
  DescribeSubnetsCommand,
  type DescribeSubnetsResult,
  DescribeVpcsCommand,
  type DescribeVpcsResult,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import {
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  DescribeLoadBalancersCommand,
  type DescribeLoadBalancersOutput,
  DescribeTargetGroupsCommand,
  type DescribeTargetGroupsOutput,
} from "@aws-sdk/client-elastic-load-balancing-v2";
import {
  ChangeResourceRecordSetsCommand,
  ListResourceRecordSetsCommand,
  type ListResourceRecordSetsResponse,
} from "@aws-sdk/client-route-53";
import { clusterFilter, type DeployTarget, send, shortName } from "./target.ts";

/**
 * Tears down what an auto deploy made, found afresh each time (never from saved ids): by the
 * cluster's tag, or by the names derived from its uuid. A VPC or subnets the request named carry
 * no tag and stay. Deletes of what is already gone are no error, so a teardown cut off by a crash
 * is run again from the start; dependents go first, and a resource AWS still sees in use
 * (instances take time to terminate) is retried until `deadline`.
 */
const GONE = {
  lb: ["LoadBalancerNotFound", "LoadBalancerNotFoundException"],
  tg: ["TargetGroupNotFound", "TargetGroupNotFoundException"],
  asg: ["ValidationError"],
};

async function whileInUse(deadline: number, action: () => Promise<unknown>): Promise<void> {
  for (let wait = 200; ; wait = Math.min(wait * 2, 5_000)) {
    try {
      await action();
      return;
    } catch (err) {
      const inUse = /DependencyViolation|ResourceInUse/.test(String((err as Error).message));
      if (!inUse || Date.now() + wait > deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

async function dnsRecord(target: DeployTarget, dns: { hostedZoneId: string; name: string }): Promise<void> {
  const name = dns.name.endsWith(".") ? dns.name : `${dns.name}.`;
  const list = await send<ListResourceRecordSetsResponse>(
    target,
    "route53",
    new ListResourceRecordSetsCommand({
      HostedZoneId: dns.hostedZoneId,
      StartRecordName: name,
      StartRecordType: "CNAME",
    }),
  );
  const record = list?.ResourceRecordSets?.find((r) => r.Name === name.toLowerCase() && r.Type === "CNAME");
  if (!record) return;
  await send(
    target,
    "route53",
    new ChangeResourceRecordSetsCommand({
      HostedZoneId: dns.hostedZoneId,
      ChangeBatch: { Changes: [{ Action: "DELETE", ResourceRecordSet: record }] },
    }),
    ["InvalidChangeBatch"],
  );
}

export async function teardownAll(
  target: DeployTarget,
  options: { dns?: { hostedZoneId: string; name: string }; deadline: number },
): Promise<void> {
  if (options.dns) await dnsRecord(target, options.dns);
  const name = shortName(target, "api");
  const lbs = await send<DescribeLoadBalancersOutput>(
    target,
    "elbv2",
    new DescribeLoadBalancersCommand({ Names: [name] }),
    GONE.lb,
  );
  for (const lb of lbs?.LoadBalancers ?? []) {
    await send(target, "elbv2", new DeleteLoadBalancerCommand({ LoadBalancerArn: lb.LoadBalancerArn }), GONE.lb);
  }
  const tgs = await send<DescribeTargetGroupsOutput>(
    target,
    "elbv2",
    new DescribeTargetGroupsCommand({ Names: [name] }),
    GONE.tg,
  );
  for (const tg of tgs?.TargetGroups ?? []) {
    await whileInUse(options.deadline, () =>
      send(target, "elbv2", new DeleteTargetGroupCommand({ TargetGroupArn: tg.TargetGroupArn }), GONE.tg),
    );
  }
  await send(
    target,
    "autoscaling",
    new DeleteAutoScalingGroupCommand({
      AutoScalingGroupName: `keelson-${target.clusterId}-workers`,
      ForceDelete: true,
    }),
    GONE.asg,
  );
  const running = await send<DescribeInstancesResult>(
    target,
    "ec2",
    new DescribeInstancesCommand({
      Filters: [
        ...clusterFilter(target),
        { Name: "instance-state-name", Values: ["pending", "running", "stopping", "stopped"] },
      ],
    }),
  );
  const instanceIds = (running?.Reservations ?? [])
    .flatMap((r) => r.Instances ?? [])
    .map((i) => i.InstanceId as string);
  if (instanceIds.length > 0) await send(target, "ec2", new TerminateInstancesCommand({ InstanceIds: instanceIds }));
  const templates = await send<DescribeLaunchTemplatesResult>(
    target,
    "ec2",
    new DescribeLaunchTemplatesCommand({ Filters: clusterFilter(target) }),
  );
  for (const t of templates?.LaunchTemplates ?? []) {
    await send(target, "ec2", new DeleteLaunchTemplateCommand({ LaunchTemplateId: t.LaunchTemplateId }), [
      "InvalidLaunchTemplateId.NotFound",
    ]);
  }
  const groups = await send<DescribeSecurityGroupsResult>(
    target,
    "ec2",
    new DescribeSecurityGroupsCommand({ Filters: clusterFilter(target) }),
  );
  for (const g of groups?.SecurityGroups ?? []) {
    await whileInUse(options.deadline, () =>
      send(target, "ec2", new DeleteSecurityGroupCommand({ GroupId: g.GroupId }), ["InvalidGroup.NotFound"]),
    );
  }
  const subnets = await send<DescribeSubnetsResult>(
    target,
    "ec2",
    new DescribeSubnetsCommand({ Filters: clusterFilter(target) }),
  );
  for (const s of subnets?.Subnets ?? []) {
    await whileInUse(options.deadline, () =>
      send(target, "ec2", new DeleteSubnetCommand({ SubnetId: s.SubnetId }), ["InvalidSubnetID.NotFound"]),
    );
  }
  const vpcs = await send<DescribeVpcsResult>(
    target,
    "ec2",
    new DescribeVpcsCommand({ Filters: clusterFilter(target) }),
  );
  for (const v of vpcs?.Vpcs ?? []) {
    await whileInUse(options.deadline, () =>
      send(target, "ec2", new DeleteVpcCommand({ VpcId: v.VpcId }), ["InvalidVpcID.NotFound"]),
    );
  }
}
