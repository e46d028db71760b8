import { TagBook, type TaggedResource, type Tags } from "./tags.ts";

/**
 * STAND-IN, for tests: what the account's deploy-time services hold, shared by the EC2, Auto
 * Scaling, ELBv2 and Route 53 modules (an Auto Scaling group runs EC2 instances, a target group
 * lives in a VPC). Every created resource is also in `tags`, whatever service made it.
 */
export interface VpcRecord {
  vpcId: string;
  cidrBlock: string;
}
export interface SubnetRecord {
  subnetId: string;
  vpcId: string;
  cidrBlock: string;
  availabilityZone: string;
}
export interface SecurityGroupRecord {
  groupId: string;
  groupName: string;
  description: string;
  vpcId: string;
  ingress: { protocol: string; fromPort: number; toPort: number; cidr?: string; groupId?: string }[];
}
/** What one version of a launch template launches. */
export interface LaunchTemplateData {
  imageId: string;
  instanceType: string;
  securityGroupIds: string[];
  /** Base64, as sent. */
  userData: string;
}
/** Its top-level data is the default version's (what a launch without a version uses). */
export interface LaunchTemplateRecord extends LaunchTemplateData {
  launchTemplateId: string;
  launchTemplateName: string;
  /** Version N is versions[N - 1]; version 1 is the create's. */
  versions: LaunchTemplateData[];
  defaultVersion: number;
}
export interface InstanceRecord {
  instanceId: string;
  region: string;
  subnetId: string;
  vpcId: string;
  availabilityZone: string;
  privateIpAddress: string;
  launchTemplateId: string;
  imageId: string;
  instanceType: string;
  state: "running" | "terminated";
  launchTime: string;
  autoScalingGroup?: string;
}

/**
 * What boots an instance: the stand-in calls `start` when an instance is launched (with its
 * launch template's user data) and `stop` when it is terminated or the stand-in closes. Without
 * one, instances only exist on paper.
 */
export interface InstanceHost {
  start(instance: InstanceRecord, userDataBase64: string): Promise<void> | void;
  stop(instanceId: string): Promise<void> | void;
}

export class World {
  readonly tags = new TagBook();
  readonly vpcs = new Map<string, VpcRecord>();
  readonly subnets = new Map<string, SubnetRecord>();
  readonly securityGroups = new Map<string, SecurityGroupRecord>();
  readonly launchTemplates = new Map<string, LaunchTemplateRecord>();
  readonly instances = new Map<string, InstanceRecord>();
  /** RunInstances' ClientToken → the instances it launched (EC2's idempotent launch). */
  readonly clientTokens = new Map<string, string[]>();
  host: InstanceHost | undefined;
  /** Instance boots and stops under way, so close() can wait for them. */
  readonly pending = new Set<Promise<void>>();
  private counter = 0;
  private nextIp = 0;

  /** An id in AWS's shape: `vpc-0123…` (17 hex digits). */
  newId(prefix: string): string {
    return `${prefix}-${(++this.counter).toString(16).padStart(17, "0")}`;
  }

  /** A loopback address per instance (127.0.12.1 onwards), so each agent listens on its own. */
  newPrivateIp(): string {
    const n = this.nextIp++;
    return `127.0.${12 + Math.floor(n / 250)}.${(n % 250) + 1}`;
  }

  record(region: string, kind: string, id: string, tags: Tags): void {
    this.tags.add(region, kind, id, tags);
  }

  /** What an instance host threw, for a test's failure message. */
  readonly hostErrors: string[] = [];

  track(work: Promise<void> | void): void {
    if (!work) return;
    const p = work
      .catch((err: unknown) => {
        this.hostErrors.push(String(err));
      })
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  /** `userData`: RunInstances' own, which overrides the launch template's. */
  launch(instance: InstanceRecord, tags: Tags, userData?: string): void {
    this.instances.set(instance.instanceId, instance);
    this.record(instance.region, "instance", instance.instanceId, tags);
    const template = this.launchTemplates.get(instance.launchTemplateId);
    const data = userData ?? template?.userData;
    if (this.host && data !== undefined) this.track(this.host.start(instance, data));
  }

  terminate(instanceId: string): void {
    const instance = this.instances.get(instanceId);
    if (!instance || instance.state === "terminated") return;
    // Its tags stay readable (DescribeInstances shows a terminated instance for a while).
    instance.state = "terminated";
    if (this.host) this.track(this.host.stop(instanceId));
  }

  /** Resources that still exist: everything tagged, less terminated instances. */
  live(): TaggedResource[] {
    return this.tags.all().filter((r) => r.kind !== "instance" || this.instances.get(r.id)?.state === "running");
  }

  /** Terminates every running instance (the stand-in closing) and waits for their hosts. */
  async shutdown(): Promise<void> {
    for (const id of this.instances.keys()) this.terminate(id);
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}
