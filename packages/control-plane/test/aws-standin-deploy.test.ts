import {
  AutoScalingClient,
  CreateAutoScalingGroupCommand,
  DeleteAutoScalingGroupCommand,
  DescribeAutoScalingGroupsCommand,
  TerminateInstanceInAutoScalingGroupCommand,
  type TerminateInstanceInAutoScalingGroupType,
  UpdateAutoScalingGroupCommand,
} from "@aws-sdk/client-auto-scaling";
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateLaunchTemplateCommand,
  CreateLaunchTemplateVersionCommand,
  CreateSecurityGroupCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DeleteLaunchTemplateCommand,
  DeleteSecurityGroupCommand,
  DeleteSubnetCommand,
  DeleteVpcCommand,
  DescribeInstancesCommand,
  DescribeLaunchTemplateVersionsCommand,
  DescribeVpcsCommand,
  EC2Client,
  ModifyLaunchTemplateCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DeleteLoadBalancerCommand,
  DeleteTargetGroupCommand,
  ElasticLoadBalancingV2Client,
  RegisterTargetsCommand,
} from "@aws-sdk/client-elastic-load-balancing-v2";
import {
  ChangeResourceRecordSetsCommand,
  ListResourceRecordSetsCommand,
  Route53Client,
} from "@aws-sdk/client-route-53";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installTarget } from "../../../test/aws-standin/agent-host.ts";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import type { InstanceRecord } from "../../../test/aws-standin/world.ts";
import { instanceUserData } from "../src/domain/clusters/auto-deploy/user-data.ts";
import { agentInstallCommand } from "../src/domain/install/agent-install.ts";

/**
 * The deploy-time services of the AWS stand-in, through the unmodified SDK clients: what a
 * create makes is found again by its tags, AWS's refusals come back as the SDK's named errors,
 * and instances are booted and stopped through the instance host.
 */
describe("AWS stand-in: deploy-time services", () => {
  let standin: AwsStandin;
  const booted: { instance: InstanceRecord; userData: string }[] = [];
  const stopped: string[] = [];
  const config = () => ({
    region: "us-west-2",
    endpoint: standin.url,
    credentials: { accessKeyId: STANDIN_KEYS.key, secretAccessKey: STANDIN_KEYS.secret },
    maxAttempts: 1,
  });
  let ec2: EC2Client;
  let asg: AutoScalingClient;
  let elb: ElasticLoadBalancingV2Client;
  let r53: Route53Client;
  beforeAll(async () => {
    standin = await startAwsStandin({
      instanceHost: {
        start: (instance, userData) => {
          booted.push({ instance, userData });
        },
        stop: (id) => {
          stopped.push(id);
        },
      },
    });
    ec2 = new EC2Client(config());
    asg = new AutoScalingClient(config());
    elb = new ElasticLoadBalancingV2Client(config());
    r53 = new Route53Client({ ...config(), region: "us-east-1" });
  });
  afterAll(async () => {
    for (const c of [ec2, asg, elb, r53]) c?.destroy();
    await standin?.close();
  });

  const clusterTag = (type: "vpc" | "subnet" | "security-group" | "launch-template" | "instance") => ({
    ResourceType: type,
    Tags: [{ Key: "keelson:cluster", Value: "c-1" }],
  });

  it("creates a network, a template, instances and a group, finds them by tag, and deletes them all", async () => {
    const vpc = await ec2.send(
      new CreateVpcCommand({ CidrBlock: "10.0.0.0/16", TagSpecifications: [clusterTag("vpc")] }),
    );
    const vpcId = vpc.Vpc?.VpcId as string;
    const subnet = await ec2.send(
      new CreateSubnetCommand({
        VpcId: vpcId,
        CidrBlock: "10.0.1.0/24",
        AvailabilityZone: "us-west-2a",
        TagSpecifications: [clusterTag("subnet")],
      }),
    );
    const subnetId = subnet.Subnet?.SubnetId as string;
    const sg = await ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: "k",
        Description: "nodes",
        VpcId: vpcId,
        TagSpecifications: [clusterTag("security-group")],
      }),
    );
    const groupId = sg.GroupId as string;
    const rule = {
      GroupId: groupId,
      IpPermissions: [{ IpProtocol: "tcp", FromPort: 6443, ToPort: 6443, IpRanges: [{ CidrIp: "0.0.0.0/0" }] }],
    };
    await ec2.send(new AuthorizeSecurityGroupIngressCommand(rule));
    await expect(ec2.send(new AuthorizeSecurityGroupIngressCommand(rule))).rejects.toMatchObject({
      name: "InvalidPermission.Duplicate",
    });
    const userData = Buffer.from("#!/bin/sh\necho hello\n").toString("base64");
    const lt = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: "k-nodes",
        LaunchTemplateData: {
          ImageId: "ami-1",
          InstanceType: "m5.large",
          SecurityGroupIds: [groupId],
          UserData: userData,
        },
        TagSpecifications: [clusterTag("launch-template")],
      }),
    );
    const templateId = lt.LaunchTemplate?.LaunchTemplateId as string;
    await expect(
      ec2.send(new CreateLaunchTemplateCommand({ LaunchTemplateName: "k-nodes", LaunchTemplateData: {} })),
    ).rejects.toMatchObject({ name: "InvalidLaunchTemplateName.AlreadyExistsException" });

    // A launch retried with the same client token gets the first one's instances.
    const run = () =>
      ec2.send(
        new RunInstancesCommand({
          MinCount: 2,
          MaxCount: 2,
          SubnetId: subnetId,
          LaunchTemplate: { LaunchTemplateId: templateId },
          ClientToken: "c-1-masters",
          TagSpecifications: [clusterTag("instance")],
        }),
      );
    const first = await run();
    const again = await run();
    const masterIds = (first.Instances ?? []).map((i) => i.InstanceId);
    expect(masterIds).toHaveLength(2);
    expect((again.Instances ?? []).map((i) => i.InstanceId)).toEqual(masterIds);
    expect(booted.map((b) => b.instance.instanceId)).toEqual(masterIds);
    expect(booted[0]?.userData).toBe(userData);
    expect(new Set(booted.map((b) => b.instance.privateIpAddress)).size).toBe(2);

    await asg.send(
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: "k-workers",
        LaunchTemplate: { LaunchTemplateId: templateId },
        MinSize: 1,
        MaxSize: 5,
        DesiredCapacity: 3,
        VPCZoneIdentifier: subnetId,
        Tags: [{ Key: "keelson:cluster", Value: "c-1", PropagateAtLaunch: true }],
      }),
    );
    const groups = await asg.send(
      new DescribeAutoScalingGroupsCommand({ Filters: [{ Name: "tag:keelson:cluster", Values: ["c-1"] }] }),
    );
    expect(groups.AutoScalingGroups?.[0]).toMatchObject({ AutoScalingGroupName: "k-workers", DesiredCapacity: 3 });
    expect(groups.AutoScalingGroups?.[0]?.Instances).toHaveLength(3);
    await expect(
      asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: "k-workers", DesiredCapacity: 9 })),
    ).rejects.toMatchObject({ name: "ValidationError" });
    await asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: "k-workers", DesiredCapacity: 1 }));

    const tagged = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [
          { Name: "tag:keelson:cluster", Values: ["c-1"] },
          { Name: "instance-state-name", Values: ["running"] },
        ],
      }),
    );
    const running = (tagged.Reservations ?? []).flatMap((r) => r.Instances ?? []);
    expect(running).toHaveLength(3);
    expect(stopped).toHaveLength(2);
    const vpcs = await ec2.send(
      new DescribeVpcsCommand({ Filters: [{ Name: "tag:keelson:cluster", Values: ["c-1"] }] }),
    );
    expect(vpcs.Vpcs?.map((v) => v.VpcId)).toEqual([vpcId]);

    // The load balancer: a second create with the same name answers the first.
    const lb = () =>
      elb.send(
        new CreateLoadBalancerCommand({
          Name: "k-api",
          Type: "network",
          Scheme: "internal",
          Subnets: [subnetId],
          Tags: [{ Key: "keelson:cluster", Value: "c-1" }],
        }),
      );
    const lbArn = (await lb()).LoadBalancers?.[0]?.LoadBalancerArn as string;
    expect((await lb()).LoadBalancers?.[0]?.LoadBalancerArn).toBe(lbArn);
    const tg = await elb.send(
      new CreateTargetGroupCommand({
        Name: "k-api",
        Protocol: "TCP",
        Port: 6443,
        VpcId: vpcId,
        TargetType: "instance",
      }),
    );
    const tgArn = tg.TargetGroups?.[0]?.TargetGroupArn as string;
    await elb.send(new RegisterTargetsCommand({ TargetGroupArn: tgArn, Targets: masterIds.map((Id) => ({ Id })) }));
    await elb.send(
      new CreateListenerCommand({
        LoadBalancerArn: lbArn,
        Protocol: "TCP",
        Port: 6443,
        DefaultActions: [{ Type: "forward", TargetGroupArn: tgArn }],
      }),
    );
    await expect(elb.send(new DeleteTargetGroupCommand({ TargetGroupArn: tgArn }))).rejects.toMatchObject({
      name: "ResourceInUseException",
    });

    const zone = "Z0STANDIN00PUBLIC";
    const change = (Action: "UPSERT" | "DELETE") =>
      r53.send(
        new ChangeResourceRecordSetsCommand({
          HostedZoneId: zone,
          ChangeBatch: {
            Changes: [
              {
                Action,
                ResourceRecordSet: {
                  Name: "api.k.example.com",
                  Type: "CNAME",
                  TTL: 60,
                  ResourceRecords: [{ Value: "lb.example" }],
                },
              },
            ],
          },
        }),
      );
    await change("UPSERT");
    const records = await r53.send(new ListResourceRecordSetsCommand({ HostedZoneId: zone }));
    expect(records.ResourceRecordSets?.map((r) => r.Name)).toEqual(["api.k.example.com."]);
    await change("DELETE");
    await expect(change("DELETE")).rejects.toMatchObject({ name: "InvalidChangeBatch" });

    // Teardown, in the order AWS accepts; the VPC refuses while it still holds something.
    await expect(ec2.send(new DeleteVpcCommand({ VpcId: vpcId }))).rejects.toMatchObject({
      name: "DependencyViolation",
    });
    await elb.send(new DeleteLoadBalancerCommand({ LoadBalancerArn: lbArn }));
    await elb.send(new DeleteTargetGroupCommand({ TargetGroupArn: tgArn }));
    await expect(
      asg.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: "k-workers" })),
    ).rejects.toMatchObject({
      name: "ResourceInUseFault",
    });
    await asg.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: "k-workers", ForceDelete: true }));
    await ec2.send(new TerminateInstancesCommand({ InstanceIds: masterIds as string[] }));
    await ec2.send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: templateId }));
    await ec2.send(new DeleteSecurityGroupCommand({ GroupId: groupId }));
    await ec2.send(new DeleteSubnetCommand({ SubnetId: subnetId }));
    await ec2.send(new DeleteVpcCommand({ VpcId: vpcId }));
    await expect(ec2.send(new DeleteVpcCommand({ VpcId: vpcId }))).rejects.toMatchObject({
      name: "InvalidVpcID.NotFound",
    });
    expect(standin.world.live()).toEqual([]);
    expect(stopped).toHaveLength(5);
  });

  it("stops every running instance's host when it closes", async () => {
    const own = await startAwsStandin({ instanceHost: { start: () => {}, stop: (id) => void stopped.push(id) } });
    const client = new EC2Client({ ...config(), endpoint: own.url });
    const vpc = await client.send(new CreateVpcCommand({ CidrBlock: "10.1.0.0/16" }));
    const subnet = await client.send(
      new CreateSubnetCommand({ VpcId: vpc.Vpc?.VpcId, CidrBlock: "10.1.0.0/24", AvailabilityZone: "us-west-2b" }),
    );
    const lt = await client.send(new CreateLaunchTemplateCommand({ LaunchTemplateName: "x", LaunchTemplateData: {} }));
    const run = await client.send(
      new RunInstancesCommand({
        MinCount: 1,
        MaxCount: 1,
        SubnetId: subnet.Subnet?.SubnetId,
        LaunchTemplate: { LaunchTemplateId: lt.LaunchTemplate?.LaunchTemplateId },
      }),
    );
    client.destroy();
    const before = stopped.length;
    await own.close();
    expect(stopped.slice(before)).toEqual([run.Instances?.[0]?.InstanceId]);
  });

  it("reads the control plane, join token and CA pin from an install command in user data", () => {
    const pin = `sha256:${"a".repeat(64)}`;
    const encode = (command: string | null) => Buffer.from(`#!/bin/sh\n${command}\n`).toString("base64");
    expect(installTarget(encode(agentInstallCommand("https://10.0.0.5:8443", pin, "kjt_1")))).toEqual({
      controlPlane: "https://10.0.0.5:8443",
      joinToken: "kjt_1",
      caHash: pin,
      readsInstanceId: false,
      env: {},
    });
    expect(installTarget(encode(agentInstallCommand("http://127.0.0.1:8080", null, "kjt_2")))).toEqual({
      controlPlane: "http://127.0.0.1:8080",
      joinToken: "kjt_2",
      readsInstanceId: false,
      env: {},
    });
    // An auto deploy's user data: the instance id from the metadata service, the proxy exported.
    const boot = instanceUserData(agentInstallCommand("http://127.0.0.1:8080", null, "kjt_3") as string, {
      controlPlane: "http://127.0.0.1:8080",
      httpProxy: "http://proxy:3128",
    });
    expect(installTarget(Buffer.from(boot).toString("base64"))).toEqual({
      controlPlane: "http://127.0.0.1:8080",
      joinToken: "kjt_3",
      readsInstanceId: true,
      env: {
        HTTP_PROXY: "http://proxy:3128",
        HTTPS_PROXY: "http://proxy:3128",
        NO_PROXY: "169.254.169.254,localhost,127.0.0.1,127.0.0.1",
      },
    });
    expect(installTarget(encode("echo no agent here"))).toBeUndefined();
  });

  it("terminates one instance of a group as TerminateInstanceInAutoScalingGroup does, refusing what AWS refuses", async () => {
    const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: "10.2.0.0/16" }));
    const subnet = await ec2.send(
      new CreateSubnetCommand({ VpcId: vpc.Vpc?.VpcId, CidrBlock: "10.2.0.0/24", AvailabilityZone: "us-west-2c" }),
    );
    const lt = await ec2.send(new CreateLaunchTemplateCommand({ LaunchTemplateName: "t", LaunchTemplateData: {} }));
    await asg.send(
      new CreateAutoScalingGroupCommand({
        AutoScalingGroupName: "t-workers",
        LaunchTemplate: { LaunchTemplateId: lt.LaunchTemplate?.LaunchTemplateId },
        MinSize: 2,
        MaxSize: 4,
        DesiredCapacity: 2,
        VPCZoneIdentifier: subnet.Subnet?.SubnetId,
      }),
    );
    const group = async () =>
      (await asg.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: ["t-workers"] })))
        .AutoScalingGroups?.[0];
    const terminate = (input: Partial<TerminateInstanceInAutoScalingGroupType>) =>
      asg.send(new TerminateInstanceInAutoScalingGroupCommand(input as TerminateInstanceInAutoScalingGroupType));
    const [first, second] = ((await group())?.Instances ?? []).map((i) => i.InstanceId as string) as [string, string];

    // Both members are required (the SDK does not check; the service does).
    await expect(terminate({ InstanceId: first })).rejects.toMatchObject({
      name: "ValidationError",
      message:
        "1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null",
    });
    await expect(terminate({ ShouldDecrementDesiredCapacity: true })).rejects.toMatchObject({
      message:
        "1 validation error detected: Value null at 'instanceId' failed to satisfy constraint: Member must not be null",
    });
    await expect(
      terminate({ InstanceId: "i-00000000000000dead", ShouldDecrementDesiredCapacity: true }),
    ).rejects.toMatchObject({
      message:
        "1 validation error detected: Value 'i-00000000000000dead' at 'instanceId' failed to satisfy constraint: Member must have length less than or equal to 19",
    });
    for (const unknown of ["i-0000000000000dead", "i-0123"]) {
      await expect(terminate({ InstanceId: unknown, ShouldDecrementDesiredCapacity: true })).rejects.toMatchObject({
        name: "ValidationError",
        message: `Instance Id not found - No managed instance found for instance ID: ${unknown}`,
      });
    }
    // At its MinSize the group may not shrink by a termination.
    await expect(terminate({ InstanceId: first, ShouldDecrementDesiredCapacity: true })).rejects.toMatchObject({
      message:
        "Currently, desiredSize equals minSize (2). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.",
    });
    expect(standin.world.instances.get(first)?.state).toBe("running");

    // Without the decrement the group launches a replacement.
    const replaced = await terminate({ InstanceId: first, ShouldDecrementDesiredCapacity: false });
    expect(replaced.Activity).toMatchObject({
      AutoScalingGroupName: "t-workers",
      Description: `Terminating EC2 instance: ${first}`,
      StatusCode: "InProgress",
    });
    expect(standin.world.instances.get(first)?.state).toBe("terminated");
    const afterReplace = await group();
    expect(afterReplace?.DesiredCapacity).toBe(2);
    const third = afterReplace?.Instances?.map((i) => i.InstanceId).find((id) => id !== second) as string;
    expect([first, second]).not.toContain(third);

    // With it, below a lowered MinSize: one fewer, nothing launched.
    await asg.send(new UpdateAutoScalingGroupCommand({ AutoScalingGroupName: "t-workers", MinSize: 0 }));
    const shrunk = await terminate({ InstanceId: second, ShouldDecrementDesiredCapacity: true });
    expect(shrunk.Activity?.Cause).toContain("shrinking the capacity from 2 to 1");
    expect(await group()).toMatchObject({ DesiredCapacity: 1, Instances: [{ InstanceId: third }] });
    // A terminated instance is no longer the group's.
    await expect(terminate({ InstanceId: second, ShouldDecrementDesiredCapacity: true })).rejects.toMatchObject({
      message: `Instance Id not found - No managed instance found for instance ID: ${second}`,
    });
    expect(standin.autoScaling.terminateRequests).toHaveLength(7);
    await asg.send(new DeleteAutoScalingGroupCommand({ AutoScalingGroupName: "t-workers", ForceDelete: true }));
  });

  it("keeps launch template versions: a new version over its source, the default chosen, launches from the default", async () => {
    const first = Buffer.from("#!/bin/sh\necho v1\n").toString("base64");
    const second = Buffer.from("#!/bin/sh\necho v2\n").toString("base64");
    const lt = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: "v-nodes",
        LaunchTemplateData: { ImageId: "ami-1", InstanceType: "m5.large", UserData: first },
      }),
    );
    const id = lt.LaunchTemplate?.LaunchTemplateId as string;
    await expect(
      ec2.send(
        new CreateLaunchTemplateVersionCommand({
          LaunchTemplateId: "lt-00000000000000bad",
          LaunchTemplateData: { UserData: second },
        }),
      ),
    ).rejects.toMatchObject({ name: "InvalidLaunchTemplateId.NotFound" });
    await expect(
      ec2.send(
        new CreateLaunchTemplateVersionCommand({
          LaunchTemplateId: id,
          SourceVersion: "7",
          LaunchTemplateData: { UserData: second },
        }),
      ),
    ).rejects.toMatchObject({ name: "InvalidLaunchTemplateId.VersionNotFound" });
    const made = await ec2.send(
      new CreateLaunchTemplateVersionCommand({
        LaunchTemplateId: id,
        SourceVersion: "$Latest",
        LaunchTemplateData: { UserData: second },
      }),
    );
    expect(made.LaunchTemplateVersion).toMatchObject({
      VersionNumber: 2,
      DefaultVersion: false,
      LaunchTemplateData: { ImageId: "ami-1", InstanceType: "m5.large", UserData: second },
    });
    await expect(
      ec2.send(new ModifyLaunchTemplateCommand({ LaunchTemplateId: id, DefaultVersion: "3" })),
    ).rejects.toMatchObject({ name: "InvalidLaunchTemplateId.VersionNotFound" });
    const modified = await ec2.send(new ModifyLaunchTemplateCommand({ LaunchTemplateId: id, DefaultVersion: "2" }));
    expect(modified.LaunchTemplate).toMatchObject({ DefaultVersionNumber: 2, LatestVersionNumber: 2 });
    const current = await ec2.send(
      new DescribeLaunchTemplateVersionsCommand({ LaunchTemplateId: id, Versions: ["$Default"] }),
    );
    expect(current.LaunchTemplateVersions?.map((v) => [v.VersionNumber, v.LaunchTemplateData?.UserData])).toEqual([
      [2, second],
    ]);
    expect(standin.world.launchTemplates.get(id)?.userData).toBe(second);
    await ec2.send(new DeleteLaunchTemplateCommand({ LaunchTemplateId: id }));
  });
});
