import { STANDIN_ACCOUNT_ID } from "./data.ts";
import { Ec2Error, filters, listParam, matches } from "./ec2.ts";
import { type Tags, tagParams, tagSpecifications, tagsMatch } from "./tags.ts";
import type { InstanceRecord, LaunchTemplateData, LaunchTemplateRecord, World } from "./world.ts";
import { el, items } from "./xml.ts";

/**
 * STAND-IN, for tests: the EC2 actions an auto deploy makes (Amazon EC2 API Reference,
 * 2016-11-15, query protocol): VPCs, subnets, security groups and their ingress rules, launch
 * templates, instances (RunInstances honours `ClientToken` as EC2 does, so a retried launch
 * returns the first one's reservation), tags and tag filters, and the deletes, each with the
 * error code EC2 answers (`InvalidVpcID.NotFound`, `DependencyViolation`, …).
 */
const tagSet = (tags: Tags) =>
  items(
    "tagSet",
    [...tags].map(([k, v]) => [el("key", k), el("value", v)]),
  );

function required(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (!value) throw new Ec2Error(400, "MissingParameter", `The request must contain the parameter ${name}`);
  return value;
}

function notFound(code: string, what: string, id: string): Ec2Error {
  return new Ec2Error(400, code, `The ${what} ID '${id}' does not exist`);
}

const tagsOf = (world: World, id: string): Tags => world.tags.get(id)?.tags ?? new Map();

function byFilter<T>(world: World, list: Iterable<T>, idOf: (t: T) => string, params: URLSearchParams, region: string) {
  const wanted = filters(params);
  return [...list].filter(
    (t) => world.tags.get(idOf(t))?.region === region && tagsMatch(tagsOf(world, idOf(t)), wanted),
  );
}

const vpcXml = (world: World, v: { vpcId: string; cidrBlock: string }) => [
  el("vpcId", v.vpcId),
  el("state", "available"),
  el("cidrBlock", v.cidrBlock),
  el("isDefault", false),
  tagSet(tagsOf(world, v.vpcId)),
];

/** A subnet's fields in EC2's answers (the account's own ones too, ec2.ts). */
export const subnetFields = (
  s: { subnetId: string; vpcId: string; cidrBlock: string; availabilityZone: string; mapPublicIpOnLaunch?: boolean },
  tags: string,
) => [
  el("subnetId", s.subnetId),
  el("state", "available"),
  el("vpcId", s.vpcId),
  el("cidrBlock", s.cidrBlock),
  el("availableIpAddressCount", 250),
  el("availabilityZone", s.availabilityZone),
  el("mapPublicIpOnLaunch", s.mapPublicIpOnLaunch ?? false),
  tags,
];

const subnetXml = (world: World, s: { subnetId: string; vpcId: string; cidrBlock: string; availabilityZone: string }) =>
  subnetFields(s, tagSet(tagsOf(world, s.subnetId)));

const STATE_CODE = { running: 16, terminated: 48 } as const;

function instanceXml(world: World, i: InstanceRecord): string[] {
  return [
    el("instanceId", i.instanceId),
    el("imageId", i.imageId),
    el("instanceState", [el("code", STATE_CODE[i.state]), el("name", i.state)]),
    el("privateIpAddress", i.privateIpAddress),
    el("instanceType", i.instanceType),
    el("launchTime", i.launchTime),
    el("placement", [el("availabilityZone", i.availabilityZone)]),
    el("subnetId", i.subnetId),
    el("vpcId", i.vpcId),
    tagSet(tagsOf(world, i.instanceId)),
  ];
}

/** Created VPCs and subnets, for DescribeVpcs / DescribeSubnets beside the account's own. */
export function describeCreatedVpcs(world: World, region: string, params: URLSearchParams): string[][] {
  const ids = listParam(params, "VpcId");
  return byFilter(world, world.vpcs.values(), (v) => v.vpcId, params, region)
    .filter((v) => ids.length === 0 || ids.includes(v.vpcId))
    .map((v) => vpcXml(world, v));
}

export function describeCreatedSubnets(world: World, region: string, params: URLSearchParams): string[][] {
  const ids = listParam(params, "SubnetId");
  const vpcFilter = filters(params).get("vpc-id");
  return byFilter(world, world.subnets.values(), (s) => s.subnetId, params, region)
    .filter((s) => (ids.length === 0 || ids.includes(s.subnetId)) && matches(vpcFilter, s.vpcId))
    .map((s) => subnetXml(world, s));
}

/** Whether anything still lives in the VPC (EC2 refuses to delete it then). */
function vpcInUse(world: World, vpcId: string): boolean {
  return (
    [...world.subnets.values()].some((s) => s.vpcId === vpcId) ||
    [...world.securityGroups.values()].some((g) => g.vpcId === vpcId)
  );
}

function runInstances(world: World, region: string, params: URLSearchParams): string {
  const token = params.get("ClientToken");
  const earlier = token ? world.clientTokens.get(token) : undefined;
  const ids = earlier ?? launchInstances(world, region, params, tagSpecifications(params, "instance"));
  if (token && !earlier) world.clientTokens.set(token, ids);
  return [
    el("reservationId", `r-${ids[0]?.slice(2) ?? "0"}`),
    el("ownerId", STANDIN_ACCOUNT_ID),
    items("groupSet", []),
    items(
      "instancesSet",
      ids.map((id) => instanceXml(world, world.instances.get(id) as InstanceRecord)),
    ),
  ].join("");
}

/** Launches `MaxCount` instances of a launch template in one subnet; their ids. */
function launchInstances(world: World, region: string, params: URLSearchParams, tags: Tags): string[] {
  const count = Number(params.get("MaxCount") ?? 1);
  return launchFromTemplate(
    world,
    region,
    params.get("LaunchTemplate.LaunchTemplateId") ?? "",
    required(params, "SubnetId"),
    count,
    tags,
    { userData: params.get("UserData") ?? undefined },
  );
}

/** `count` instances of a launch template in one subnet (RunInstances, or an Auto Scaling group's). */
export function launchFromTemplate(
  world: World,
  region: string,
  templateId: string,
  subnetId: string,
  count: number,
  tags: Tags,
  options: { autoScalingGroup?: string; userData?: string } = {},
): string[] {
  const { autoScalingGroup, userData } = options;
  const template = world.launchTemplates.get(templateId);
  if (!template) throw notFound("InvalidLaunchTemplateId.NotFound", "launch template", templateId);
  const subnet = world.subnets.get(subnetId);
  if (!subnet) throw notFound("InvalidSubnetID.NotFound", "subnet", subnetId);
  return Array.from({ length: count }, () => {
    const instance: InstanceRecord = {
      instanceId: world.newId("i"),
      region,
      subnetId,
      vpcId: subnet.vpcId,
      availabilityZone: subnet.availabilityZone,
      privateIpAddress: world.newPrivateIp(),
      launchTemplateId: template.launchTemplateId,
      imageId: template.imageId,
      instanceType: template.instanceType,
      state: "running",
      launchTime: new Date().toISOString(),
      ...(autoScalingGroup ? { autoScalingGroup } : {}),
    };
    world.launch(instance, tags, userData);
    return instance.instanceId;
  });
}

function describeInstances(world: World, region: string, params: URLSearchParams): string {
  const ids = listParam(params, "InstanceId");
  const states = filters(params).get("instance-state-name");
  const found = byFilter(world, world.instances.values(), (i) => i.instanceId, params, region).filter(
    (i) => (ids.length === 0 || ids.includes(i.instanceId)) && matches(states, i.state),
  );
  return items(
    "reservationSet",
    found.map((i) => [
      el("reservationId", `r-${i.instanceId.slice(2)}`),
      el("ownerId", STANDIN_ACCOUNT_ID),
      items("instancesSet", [instanceXml(world, i)]),
    ]),
  );
}

function deleteOne<T>(map: Map<string, T>, world: World, id: string, error: Ec2Error): string {
  if (!map.has(id)) throw error;
  map.delete(id);
  world.tags.remove(id);
  return el("return", true);
}

/** One deploy-time EC2 action, or undefined when `action` is not one of them. */
export function ec2DeployAction(
  world: World,
  region: string,
  action: string,
  params: URLSearchParams,
): string | undefined {
  switch (action) {
    case "CreateVpc": {
      const vpc = { vpcId: world.newId("vpc"), cidrBlock: required(params, "CidrBlock") };
      world.vpcs.set(vpc.vpcId, vpc);
      world.record(region, "vpc", vpc.vpcId, tagSpecifications(params, "vpc"));
      return el("vpc", vpcXml(world, vpc));
    }
    case "CreateSubnet": {
      const vpcId = required(params, "VpcId");
      if (!world.vpcs.has(vpcId)) throw notFound("InvalidVpcID.NotFound", "vpc", vpcId);
      const subnet = {
        subnetId: world.newId("subnet"),
        vpcId,
        cidrBlock: required(params, "CidrBlock"),
        availabilityZone: required(params, "AvailabilityZone"),
      };
      world.subnets.set(subnet.subnetId, subnet);
      world.record(region, "subnet", subnet.subnetId, tagSpecifications(params, "subnet"));
      return el("subnet", subnetXml(world, subnet));
    }
    case "CreateSecurityGroup": {
      const vpcId = required(params, "VpcId");
      const groupName = required(params, "GroupName");
      if (!world.vpcs.has(vpcId)) throw notFound("InvalidVpcID.NotFound", "vpc", vpcId);
      if ([...world.securityGroups.values()].some((g) => g.vpcId === vpcId && g.groupName === groupName)) {
        throw new Ec2Error(
          400,
          "InvalidGroup.Duplicate",
          `The security group '${groupName}' already exists for VPC '${vpcId}'`,
        );
      }
      const group = {
        groupId: world.newId("sg"),
        groupName,
        description: required(params, "GroupDescription"),
        vpcId,
        ingress: [],
      };
      world.securityGroups.set(group.groupId, group);
      world.record(region, "security-group", group.groupId, tagSpecifications(params, "security-group"));
      return el("groupId", group.groupId);
    }
    case "AuthorizeSecurityGroupIngress": {
      const groupId = required(params, "GroupId");
      const group = world.securityGroups.get(groupId);
      if (!group) throw new Ec2Error(400, "InvalidGroup.NotFound", `The security group '${groupId}' does not exist`);
      for (let i = 1; params.has(`IpPermissions.${i}.IpProtocol`); i++) {
        const p = `IpPermissions.${i}`;
        const rule = {
          protocol: params.get(`${p}.IpProtocol`) as string,
          fromPort: Number(params.get(`${p}.FromPort`) ?? -1),
          toPort: Number(params.get(`${p}.ToPort`) ?? -1),
          cidr: params.get(`${p}.IpRanges.1.CidrIp`) ?? undefined,
          groupId: params.get(`${p}.Groups.1.GroupId`) ?? undefined,
        };
        if (group.ingress.some((r) => JSON.stringify(r) === JSON.stringify(rule))) {
          throw new Ec2Error(400, "InvalidPermission.Duplicate", "the specified rule already exists");
        }
        group.ingress.push(rule);
      }
      return el("return", true);
    }
    case "DescribeSecurityGroups": {
      const ids = listParam(params, "GroupId");
      return items(
        "securityGroupInfo",
        byFilter(world, world.securityGroups.values(), (g) => g.groupId, params, region)
          .filter((g) => ids.length === 0 || ids.includes(g.groupId))
          .map((g) => [
            el("ownerId", STANDIN_ACCOUNT_ID),
            el("groupId", g.groupId),
            el("groupName", g.groupName),
            el("groupDescription", g.description),
            el("vpcId", g.vpcId),
            tagSet(tagsOf(world, g.groupId)),
          ]),
      );
    }
    case "CreateLaunchTemplate": {
      const name = required(params, "LaunchTemplateName");
      if ([...world.launchTemplates.values()].some((t) => t.launchTemplateName === name)) {
        throw new Ec2Error(
          400,
          "InvalidLaunchTemplateName.AlreadyExistsException",
          `Launch template name already in use.`,
        );
      }
      const data = launchTemplateData(params);
      const template: LaunchTemplateRecord = {
        launchTemplateId: world.newId("lt"),
        launchTemplateName: name,
        ...data,
        versions: [data],
        defaultVersion: 1,
      };
      world.launchTemplates.set(template.launchTemplateId, template);
      world.record(region, "launch-template", template.launchTemplateId, tagSpecifications(params, "launch-template"));
      return el("launchTemplate", launchTemplateXml(world, template));
    }
    case "DescribeLaunchTemplates": {
      const names = listParam(params, "LaunchTemplateName");
      return items(
        "launchTemplates",
        byFilter(world, world.launchTemplates.values(), (t) => t.launchTemplateId, params, region)
          .filter((t) => names.length === 0 || names.includes(t.launchTemplateName))
          .map((t) => launchTemplateXml(world, t)),
      );
    }
    case "RunInstances":
      return runInstances(world, region, params);
    case "DescribeInstances":
      return describeInstances(world, region, params);
    case "TerminateInstances": {
      const ids = listParam(params, "InstanceId");
      const missing = ids.find((id) => !world.instances.has(id));
      if (missing) throw notFound("InvalidInstanceID.NotFound", "instance", missing);
      return items(
        "instancesSet",
        ids.map((id) => {
          const before = (world.instances.get(id) as InstanceRecord).state;
          world.terminate(id);
          return [
            el("instanceId", id),
            el("currentState", [el("code", STATE_CODE.terminated), el("name", "terminated")]),
            el("previousState", [el("code", STATE_CODE[before]), el("name", before)]),
          ];
        }),
      );
    }
    case "CreateTags": {
      const tags = tagParams(params, "Tag");
      for (const id of listParam(params, "ResourceId")) {
        const resource = world.tags.get(id);
        if (!resource) throw new Ec2Error(400, "InvalidID", `The ID '${id}' is not valid`);
        for (const [k, v] of tags) resource.tags.set(k, v);
      }
      return el("return", true);
    }
    case "DeleteVpc": {
      const id = required(params, "VpcId");
      if (vpcInUse(world, id)) {
        throw new Ec2Error(400, "DependencyViolation", `The vpc '${id}' has dependencies and cannot be deleted.`);
      }
      return deleteOne(world.vpcs, world, id, notFound("InvalidVpcID.NotFound", "vpc", id));
    }
    case "DeleteSubnet": {
      const id = required(params, "SubnetId");
      const inUse = [...world.instances.values()].some((i) => i.subnetId === id && i.state === "running");
      if (inUse) {
        throw new Ec2Error(400, "DependencyViolation", `The subnet '${id}' has dependencies and cannot be deleted.`);
      }
      return deleteOne(world.subnets, world, id, notFound("InvalidSubnetID.NotFound", "subnet", id));
    }
    case "DeleteSecurityGroup": {
      const id = required(params, "GroupId");
      const inUse = [...world.instances.values()].some(
        (i) => i.state === "running" && world.launchTemplates.get(i.launchTemplateId)?.securityGroupIds.includes(id),
      );
      if (inUse) {
        throw new Ec2Error(400, "DependencyViolation", `resource ${id} has a dependent object`);
      }
      return deleteOne(
        world.securityGroups,
        world,
        id,
        new Ec2Error(400, "InvalidGroup.NotFound", `The security group '${id}' does not exist`),
      );
    }
    case "DeleteLaunchTemplate": {
      const id = required(params, "LaunchTemplateId");
      const template = world.launchTemplates.get(id);
      deleteOne(
        world.launchTemplates,
        world,
        id,
        new Ec2Error(
          400,
          "InvalidLaunchTemplateId.NotFound",
          `The specified launch template, with template ID ${id}, does not exist.`,
        ),
      );
      return el("launchTemplate", [
        el("launchTemplateId", id),
        el("launchTemplateName", template?.launchTemplateName ?? ""),
      ]);
    }
    default:
      return undefined;
  }
}

/** LaunchTemplateData.* of a request, over `base` (CreateLaunchTemplateVersion's SourceVersion). */
export function launchTemplateData(params: URLSearchParams, base?: LaunchTemplateData): LaunchTemplateData {
  const groups = listParam(params, "LaunchTemplateData.SecurityGroupId");
  return {
    imageId: params.get("LaunchTemplateData.ImageId") ?? base?.imageId ?? "",
    instanceType: params.get("LaunchTemplateData.InstanceType") ?? base?.instanceType ?? "",
    securityGroupIds: groups.length > 0 ? groups : (base?.securityGroupIds ?? []),
    userData: params.get("LaunchTemplateData.UserData") ?? base?.userData ?? "",
  };
}

export function launchTemplateXml(world: World, t: LaunchTemplateRecord): string[] {
  return [
    el("launchTemplateId", t.launchTemplateId),
    el("launchTemplateName", t.launchTemplateName),
    el("createdBy", `arn:aws:iam::${STANDIN_ACCOUNT_ID}:user/keelson`),
    el("defaultVersionNumber", t.defaultVersion),
    el("latestVersionNumber", t.versions.length),
    tagSet(tagsOf(world, t.launchTemplateId)),
  ];
}
