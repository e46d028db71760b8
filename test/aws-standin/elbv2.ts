import { STANDIN_ACCOUNT_ID } from "./data.ts";
import { AwsError, memberParams, members } from "./query.ts";
import { tagParams } from "./tags.ts";
import type { World } from "./world.ts";
import { el } from "./xml.ts";

/**
 * STAND-IN, for tests: Elastic Load Balancing v2 (ELBv2 API Reference, 2015-12-01, query
 * protocol): load balancers, target groups, listeners, targets, and their deletes. As on AWS,
 * creating a load balancer or target group again with the same name and settings answers the
 * existing one (so a retried create finds what the first made), and a target group in use by a
 * listener cannot be deleted (`ResourceInUse`).
 */
export const ELBV2_NAMESPACE = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/";

interface LoadBalancer {
  arn: string;
  name: string;
  region: string;
  scheme: string;
  type: string;
  subnets: string[];
  securityGroups: string[];
  vpcId: string;
  dnsName: string;
}
interface TargetGroup {
  arn: string;
  name: string;
  region: string;
  protocol: string;
  port: number;
  vpcId: string;
  targets: Set<string>;
}
interface Listener {
  arn: string;
  loadBalancerArn: string;
  protocol: string;
  port: number;
  targetGroupArn: string;
}

export class Elbv2State {
  readonly loadBalancers = new Map<string, LoadBalancer>();
  readonly targetGroups = new Map<string, TargetGroup>();
  readonly listeners = new Map<string, Listener>();
}

const arnOf = (region: string, kind: string, name: string, id: string) =>
  `arn:aws:elasticloadbalancing:${region}:${STANDIN_ACCOUNT_ID}:${kind}/${name}/${id}`;

function required(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (!value)
    throw new AwsError(
      400,
      "ValidationError",
      `1 validation error detected: Value null at '${name}' failed to satisfy constraint: Member must not be null`,
    );
  return value;
}

const lbXml = (lb: LoadBalancer) => [
  el("LoadBalancerArn", lb.arn),
  el("DNSName", lb.dnsName),
  el("LoadBalancerName", lb.name),
  el("Scheme", lb.scheme),
  el("VpcId", lb.vpcId),
  el("State", [el("Code", "active")]),
  el("Type", lb.type),
  members(
    "AvailabilityZones",
    lb.subnets.map((s) => [el("SubnetId", s)]),
  ),
  members(
    "SecurityGroups",
    lb.securityGroups.map((g) => [g]),
  ),
];
const tgXml = (tg: TargetGroup) => [
  el("TargetGroupArn", tg.arn),
  el("TargetGroupName", tg.name),
  el("Protocol", tg.protocol),
  el("Port", tg.port),
  el("VpcId", tg.vpcId),
  el("TargetType", "instance"),
];
const listenerXml = (l: Listener) => [
  el("ListenerArn", l.arn),
  el("LoadBalancerArn", l.loadBalancerArn),
  el("Port", l.port),
  el("Protocol", l.protocol),
  members("DefaultActions", [[el("Type", "forward"), el("TargetGroupArn", l.targetGroupArn)]]),
];

function find<T>(map: Map<string, T>, arn: string, code: string, what: string): T {
  const found = map.get(arn);
  if (!found) throw new AwsError(400, code, `${what} '${arn}' not found`);
  return found;
}

/** One ELBv2 action: the `<ActionResult>` content ("" for an empty result). */
export function elbv2Action(state: Elbv2State, world: World, region: string, params: URLSearchParams): string {
  const action = params.get("Action");
  switch (action) {
    case "CreateLoadBalancer": {
      const name = required(params, "Name");
      const existing = [...state.loadBalancers.values()].find((lb) => lb.name === name && lb.region === region);
      if (existing) return members("LoadBalancers", [lbXml(existing)]);
      const subnets = memberParams(params, "Subnets");
      const subnet = world.subnets.get(subnets[0] ?? "");
      if (!subnet) throw new AwsError(400, "SubnetNotFound", `The subnet ID '${subnets[0] ?? ""}' is not valid`);
      const id = world.newId("lb").slice(3, 19);
      const scheme = params.get("Scheme") ?? "internet-facing";
      const lb: LoadBalancer = {
        arn: arnOf(region, "loadbalancer/net", name, id),
        name,
        region,
        scheme,
        type: params.get("Type") ?? "application",
        subnets,
        securityGroups: memberParams(params, "SecurityGroups"),
        vpcId: subnet.vpcId,
        dnsName: `${scheme === "internal" ? "internal-" : ""}${name}-${id}.elb.${region}.amazonaws.com`,
      };
      state.loadBalancers.set(lb.arn, lb);
      world.record(region, "load-balancer", lb.arn, tagParams(params, "Tags.member"));
      return members("LoadBalancers", [lbXml(lb)]);
    }
    case "DescribeLoadBalancers": {
      const names = memberParams(params, "Names");
      const found = [...state.loadBalancers.values()].filter(
        (lb) => lb.region === region && (names.length === 0 || names.includes(lb.name)),
      );
      const missing = names.find((n) => !found.some((lb) => lb.name === n));
      if (missing) throw new AwsError(400, "LoadBalancerNotFound", `Load balancers '[${missing}]' not found`);
      return members("LoadBalancers", found.map(lbXml));
    }
    case "DeleteLoadBalancer": {
      const arn = required(params, "LoadBalancerArn");
      // Deleting one that is gone succeeds on AWS.
      state.loadBalancers.delete(arn);
      for (const [listenerArn, l] of state.listeners)
        if (l.loadBalancerArn === arn) state.listeners.delete(listenerArn);
      world.tags.remove(arn);
      return "";
    }
    case "CreateTargetGroup": {
      const name = required(params, "Name");
      const existing = [...state.targetGroups.values()].find((tg) => tg.name === name && tg.region === region);
      if (existing) return members("TargetGroups", [tgXml(existing)]);
      const vpcId = required(params, "VpcId");
      if (!world.vpcs.has(vpcId)) throw new AwsError(400, "ValidationError", `The VPC ID '${vpcId}' is not found`);
      const tg: TargetGroup = {
        arn: arnOf(region, "targetgroup", name, world.newId("tg").slice(3, 19)),
        name,
        region,
        protocol: params.get("Protocol") ?? "TCP",
        port: Number(params.get("Port") ?? 0),
        vpcId,
        targets: new Set(),
      };
      state.targetGroups.set(tg.arn, tg);
      world.record(region, "target-group", tg.arn, tagParams(params, "Tags.member"));
      return members("TargetGroups", [tgXml(tg)]);
    }
    case "DescribeTargetGroups": {
      const names = memberParams(params, "Names");
      const lbArn = params.get("LoadBalancerArn");
      const found = [...state.targetGroups.values()].filter(
        (tg) =>
          tg.region === region &&
          (names.length === 0 || names.includes(tg.name)) &&
          (!lbArn ||
            [...state.listeners.values()].some((l) => l.loadBalancerArn === lbArn && l.targetGroupArn === tg.arn)),
      );
      const missing = names.find((n) => !found.some((tg) => tg.name === n));
      if (missing) throw new AwsError(400, "TargetGroupNotFound", `One or more target groups not found`);
      return members("TargetGroups", found.map(tgXml));
    }
    case "DeleteTargetGroup": {
      const arn = required(params, "TargetGroupArn");
      if ([...state.listeners.values()].some((l) => l.targetGroupArn === arn)) {
        throw new AwsError(400, "ResourceInUse", `Target group '${arn}' is currently in use by a listener or a rule`);
      }
      state.targetGroups.delete(arn);
      world.tags.remove(arn);
      return "";
    }
    case "CreateListener": {
      const lb = find(
        state.loadBalancers,
        required(params, "LoadBalancerArn"),
        "LoadBalancerNotFound",
        "Load balancer",
      );
      const port = Number(required(params, "Port"));
      const targetGroupArn = params.get("DefaultActions.member.1.TargetGroupArn") ?? "";
      find(state.targetGroups, targetGroupArn, "TargetGroupNotFound", "Target group");
      const existing = [...state.listeners.values()].find((l) => l.loadBalancerArn === lb.arn && l.port === port);
      if (existing) {
        if (existing.targetGroupArn === targetGroupArn) return members("Listeners", [listenerXml(existing)]);
        throw new AwsError(400, "DuplicateListener", "A listener already exists on this port for this load balancer");
      }
      const listener: Listener = {
        arn: lb.arn.replace(":loadbalancer/", ":listener/") + `/${world.newId("l").slice(2, 18)}`,
        loadBalancerArn: lb.arn,
        protocol: params.get("Protocol") ?? "TCP",
        port,
        targetGroupArn,
      };
      state.listeners.set(listener.arn, listener);
      return members("Listeners", [listenerXml(listener)]);
    }
    case "DescribeListeners": {
      const lbArn = params.get("LoadBalancerArn");
      return members(
        "Listeners",
        [...state.listeners.values()].filter((l) => l.loadBalancerArn === lbArn).map(listenerXml),
      );
    }
    case "DeleteListener": {
      const arn = required(params, "ListenerArn");
      find(state.listeners, arn, "ListenerNotFound", "Listener");
      state.listeners.delete(arn);
      return "";
    }
    case "RegisterTargets":
    case "DeregisterTargets": {
      const tg = find(state.targetGroups, required(params, "TargetGroupArn"), "TargetGroupNotFound", "Target group");
      for (let i = 1; params.has(`Targets.member.${i}.Id`); i++) {
        const id = params.get(`Targets.member.${i}.Id`) as string;
        if (action === "RegisterTargets") {
          if (world.instances.get(id)?.state !== "running") {
            throw new AwsError(
              400,
              "InvalidTarget",
              `The following targets are not in a running state and cannot be registered: '${id}'`,
            );
          }
          tg.targets.add(id);
        } else tg.targets.delete(id);
      }
      return "";
    }
    default:
      throw new AwsError(400, "InvalidAction", `Could not find operation ${action} for version 2015-12-01`);
  }
}
