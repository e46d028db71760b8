import { randomUUID } from "node:crypto";
import { STANDIN_ACCOUNT_ID } from "./data.ts";
import { launchFromTemplate } from "./ec2-deploy.ts";
import { AwsError, memberParams, members } from "./query.ts";
import type { Tags } from "./tags.ts";
import type { World } from "./world.ts";
import { el } from "./xml.ts";

/**
 * STAND-IN, for tests: Auto Scaling (Amazon EC2 Auto Scaling API Reference, 2011-01-01, query
 * protocol): CreateAutoScalingGroup, UpdateAutoScalingGroup, DescribeAutoScalingGroups,
 * DeleteAutoScalingGroup, TerminateInstanceInAutoScalingGroup. A group keeps `DesiredCapacity` instances of its launch template
 * running at once (AWS takes minutes; what the caller sees is the same), spread over its
 * subnets, each tagged with the group's `PropagateAtLaunch` tags and `aws:autoscaling:groupName`.
 */
export const AUTOSCALING_NAMESPACE = "http://autoscaling.amazonaws.com/doc/2011-01-01/";

interface Group {
  name: string;
  region: string;
  launchTemplateId: string;
  min: number;
  max: number;
  desired: number;
  subnets: string[];
  targetGroupArns: string[];
  tags: { key: string; value: string; propagate: boolean }[];
  created: string;
  instances: string[];
}

export class AutoScalingState {
  readonly groups = new Map<string, Group>();
  /** The InstanceId of every TerminateInstanceInAutoScalingGroup request, refused ones too, in order. */
  readonly terminateRequests: string[] = [];
  constructor(private readonly world: World) {}

  /** Launches or terminates instances until the group has `desired` running. */
  reconcile(group: Group): void {
    const running = group.instances.filter((id) => this.world.instances.get(id)?.state === "running");
    const propagated: Tags = new Map(group.tags.filter((t) => t.propagate).map((t) => [t.key, t.value]));
    propagated.set("aws:autoscaling:groupName", group.name);
    for (let i = running.length; i < group.desired; i++) {
      const subnet = group.subnets[i % group.subnets.length] as string;
      running.push(
        ...launchFromTemplate(this.world, group.region, group.launchTemplateId, subnet, 1, propagated, {
          autoScalingGroup: group.name,
        }),
      );
    }
    // Scale-in takes the newest first (AWS's default policy weighs zones, then the oldest template).
    while (running.length > group.desired) this.world.terminate(running.pop() as string);
    group.instances = running;
  }
}

function intParam(params: URLSearchParams, name: string, fallback?: number): number {
  const raw = params.get(name);
  if (raw === null) {
    if (fallback !== undefined) return fallback;
    throw missing(name);
  }
  return Number(raw);
}

/** A required member left out, in AWS's words (its name lower-camel-cased, as the service models it). */
function missing(name: string): AwsError {
  return new AwsError(
    400,
    "ValidationError",
    `1 validation error detected: Value null at '${name.charAt(0).toLowerCase()}${name.slice(1)}' failed to satisfy constraint: Member must not be null`,
  );
}

/**
 * TerminateInstanceInAutoScalingGroup (API reference: InstanceId, String, 1–19 characters, and
 * ShouldDecrementDesiredCapacity, Boolean, both required; the result is the scaling Activity).
 * An id that no group manages is AWS's ValidationError "Instance Id not found - No managed
 * instance found for instance ID: i-…"; a decrement below the group's MinSize is refused as AWS
 * refuses it. Without the decrement the group launches a replacement (reconcile).
 */
function terminateInGroup(state: AutoScalingState, world: World, region: string, params: URLSearchParams): string {
  const instanceId = params.get("InstanceId");
  const decrement = params.get("ShouldDecrementDesiredCapacity");
  if (instanceId === null) throw missing("InstanceId");
  if (decrement === null) throw missing("ShouldDecrementDesiredCapacity");
  state.terminateRequests.push(instanceId);
  if (instanceId.length < 1 || instanceId.length > 19) {
    throw new AwsError(
      400,
      "ValidationError",
      `1 validation error detected: Value '${instanceId}' at 'instanceId' failed to satisfy constraint: Member must have length ${instanceId.length < 1 ? "greater than or equal to 1" : "less than or equal to 19"}`,
    );
  }
  const group = [...state.groups.values()].find((g) => g.region === region && g.instances.includes(instanceId));
  if (!group) {
    throw new AwsError(
      400,
      "ValidationError",
      `Instance Id not found - No managed instance found for instance ID: ${instanceId}`,
    );
  }
  const before = group.desired;
  if (decrement === "true") {
    if (group.desired <= group.min) {
      throw new AwsError(
        400,
        "ValidationError",
        `Currently, desiredSize equals minSize (${group.min}). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.`,
      );
    }
    group.desired--;
  }
  world.terminate(instanceId);
  group.instances = group.instances.filter((id) => id !== instanceId);
  state.reconcile(group);
  const now = new Date().toISOString();
  return el("Activity", [
    el("ActivityId", randomUUID()),
    el("AutoScalingGroupName", group.name),
    el(
      "Cause",
      decrement === "true"
        ? `At ${now} instance ${instanceId} was taken out of service in response to a user request, shrinking the capacity from ${before} to ${group.desired}.`
        : `At ${now} instance ${instanceId} was taken out of service in response to a user request.`,
    ),
    el("Description", `Terminating EC2 instance: ${instanceId}`),
    el("StartTime", now),
    el("StatusCode", "InProgress"),
    el("Progress", 0),
  ]);
}

function checkSizes(min: number, max: number, desired: number): void {
  if (min > max)
    throw new AwsError(400, "ValidationError", `Max bound, ${max}, must be greater than or equal to min bound, ${min}`);
  if (desired < min || desired > max) {
    throw new AwsError(
      400,
      "ValidationError",
      `Desired capacity:${desired} must be between the specified min size:${min} and max size:${max}`,
    );
  }
}

function groupOf(state: AutoScalingState, params: URLSearchParams): Group {
  const name = params.get("AutoScalingGroupName") ?? "";
  const group = state.groups.get(name);
  if (!group)
    throw new AwsError(400, "ValidationError", `AutoScalingGroup name not found - AutoScalingGroup ${name} not found`);
  return group;
}

function groupXml(world: World, g: Group): string[] {
  return [
    el("AutoScalingGroupName", g.name),
    el(
      "AutoScalingGroupARN",
      `arn:aws:autoscaling:${g.region}:${STANDIN_ACCOUNT_ID}:autoScalingGroup:00000000-0000-0000-0000-000000000000:autoScalingGroupName/${g.name}`,
    ),
    el("LaunchTemplate", [el("LaunchTemplateId", g.launchTemplateId), el("Version", "$Default")]),
    el("MinSize", g.min),
    el("MaxSize", g.max),
    el("DesiredCapacity", g.desired),
    el("DefaultCooldown", 300),
    members(
      "AvailabilityZones",
      [...new Set(g.subnets.map((s) => world.subnets.get(s)?.availabilityZone ?? ""))].map((z) => [z]),
    ),
    members(
      "TargetGroupARNs",
      g.targetGroupArns.map((a) => [a]),
    ),
    el("HealthCheckType", "EC2"),
    el("CreatedTime", g.created),
    el("VPCZoneIdentifier", g.subnets.join(",")),
    members(
      "Instances",
      g.instances.map((id) => [
        el("InstanceId", id),
        el("AvailabilityZone", world.instances.get(id)?.availabilityZone ?? ""),
        el("LifecycleState", "InService"),
        el("HealthStatus", "Healthy"),
        el("LaunchTemplate", [el("LaunchTemplateId", g.launchTemplateId)]),
        el("ProtectedFromScaleIn", false),
      ]),
    ),
    members(
      "Tags",
      g.tags.map((t) => [
        el("ResourceId", g.name),
        el("ResourceType", "auto-scaling-group"),
        el("Key", t.key),
        el("Value", t.value),
        el("PropagateAtLaunch", t.propagate),
      ]),
    ),
  ];
}

/** Filters.member.N.Name = tag:<key> | tag-key | auto-scaling-group, Values.member.M. */
function passesFilters(g: Group, params: URLSearchParams): boolean {
  for (let i = 1; params.has(`Filters.member.${i}.Name`); i++) {
    const name = params.get(`Filters.member.${i}.Name`) as string;
    const values = memberParams(params, `Filters.member.${i}.Values`);
    if (name === "auto-scaling-group" && !values.includes(g.name)) return false;
    if (name === "tag-key" && !g.tags.some((t) => values.includes(t.key))) return false;
    if (name.startsWith("tag:") && !g.tags.some((t) => t.key === name.slice(4) && values.includes(t.value)))
      return false;
  }
  return true;
}

/** One Auto Scaling action: the `<ActionResult>` content, or undefined for an action with no result. */
export function autoScalingAction(
  state: AutoScalingState,
  world: World,
  region: string,
  params: URLSearchParams,
): string | undefined {
  const action = params.get("Action");
  switch (action) {
    case "CreateAutoScalingGroup": {
      const name = params.get("AutoScalingGroupName") ?? "";
      if (state.groups.has(name)) {
        throw new AwsError(
          400,
          "AlreadyExists",
          `AutoScalingGroup by this name already exists - A group with the name ${name} already exists`,
        );
      }
      const min = intParam(params, "MinSize");
      const max = intParam(params, "MaxSize");
      const desired = intParam(params, "DesiredCapacity", min);
      checkSizes(min, max, desired);
      const launchTemplateId = params.get("LaunchTemplate.LaunchTemplateId") ?? "";
      if (!world.launchTemplates.has(launchTemplateId)) {
        throw new AwsError(
          400,
          "ValidationError",
          `You must use a valid fully-formed launch template. The specified launch template, with template ID ${launchTemplateId}, does not exist.`,
        );
      }
      const subnets = (params.get("VPCZoneIdentifier") ?? "").split(",").filter(Boolean);
      const tags: Group["tags"] = [];
      for (let i = 1; params.has(`Tags.member.${i}.Key`); i++) {
        tags.push({
          key: params.get(`Tags.member.${i}.Key`) as string,
          value: params.get(`Tags.member.${i}.Value`) ?? "",
          propagate: params.get(`Tags.member.${i}.PropagateAtLaunch`) === "true",
        });
      }
      const group: Group = {
        name,
        region,
        launchTemplateId,
        min,
        max,
        desired,
        subnets,
        targetGroupArns: memberParams(params, "TargetGroupARNs"),
        tags,
        created: new Date().toISOString(),
        instances: [],
      };
      state.groups.set(name, group);
      world.record(region, "auto-scaling-group", name, new Map(tags.map((t) => [t.key, t.value])));
      state.reconcile(group);
      return undefined;
    }
    case "UpdateAutoScalingGroup": {
      const group = groupOf(state, params);
      const min = intParam(params, "MinSize", group.min);
      const max = intParam(params, "MaxSize", group.max);
      const desired = intParam(params, "DesiredCapacity", Math.min(Math.max(group.desired, min), max));
      checkSizes(min, max, desired);
      Object.assign(group, { min, max, desired });
      state.reconcile(group);
      return undefined;
    }
    case "DescribeAutoScalingGroups": {
      const names = memberParams(params, "AutoScalingGroupNames");
      const found = [...state.groups.values()].filter(
        (g) => g.region === region && (names.length === 0 || names.includes(g.name)) && passesFilters(g, params),
      );
      return members(
        "AutoScalingGroups",
        found.map((g) => groupXml(world, g)),
      );
    }
    case "DeleteAutoScalingGroup": {
      const group = groupOf(state, params);
      const running = group.instances.filter((id) => world.instances.get(id)?.state === "running");
      if (running.length > 0 && params.get("ForceDelete") !== "true") {
        throw new AwsError(
          400,
          "ResourceInUse",
          "You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group.",
        );
      }
      for (const id of running) world.terminate(id);
      state.groups.delete(group.name);
      world.tags.remove(group.name);
      return undefined;
    }
    case "TerminateInstanceInAutoScalingGroup":
      return terminateInGroup(state, world, region, params);
    default:
      throw new AwsError(400, "InvalidAction", `Could not find operation ${action} for version 2011-01-01`);
  }
}
