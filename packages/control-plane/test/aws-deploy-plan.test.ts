import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../../../test/aws-standin/server.ts";
import type { AwsAccount } from "../src/domain/cloud-providers/aws/clients.ts";
import {
  type AwsDeploySpec,
  DEPLOY_STEPS,
  type DeployState,
  deployAll,
  resizeWorkers,
} from "../src/domain/cloud-providers/aws/deploy/create.ts";
import { CLUSTER_TAG, type DeployTarget } from "../src/domain/cloud-providers/aws/deploy/target.ts";
import { teardownAll } from "../src/domain/cloud-providers/aws/deploy/teardown.ts";
import { describeWorkerGroup, terminateWorkers } from "../src/domain/cloud-providers/aws/deploy/worker-group.ts";
import { CloudClientCache } from "../src/domain/cloud-providers/client-cache.ts";
import { pickRemoved } from "../src/domain/clusters/auto-deploy/aws-resize.ts";

/**
 * The cloud steps of an AWS auto deploy against the stand-in, through the real SDK: what they
 * make, that a re-run (a crash anywhere) makes nothing twice, that a resize reaches the group,
 * and that the teardown removes every resource of the cluster and nothing of anyone else.
 */
describe("AWS auto-deploy steps", () => {
  let standin: AwsStandin;
  let account: AwsAccount;
  const clients = new CloudClientCache();
  beforeAll(async () => {
    standin = await startAwsStandin();
    account = {
      settings: { awsEndpointUrl: standin.url, cloudCallTimeoutMs: 10_000 },
      credentials: STANDIN_KEYS,
      clients,
    };
  });
  afterAll(async () => {
    clients.destroy();
    await standin?.close();
  });

  const target = (clusterId: string): DeployTarget => ({ account, region: "us-west-2", clusterId, calls: 0 });
  const spec: AwsDeploySpec = {
    azs: ["us-west-2a", "us-west-2b", "us-west-2c"],
    numMasters: 3,
    numWorkers: 4,
    enableCAS: false,
    numMinWorkers: 0,
    numMaxWorkers: 0,
    internalElb: false,
    k8sApiPort: 6443,
    imageId: "ami-0usw200000000000a2",
    masterFlavor: "m5.large",
    workerFlavor: "m5.xlarge",
    masterUserData: "#!/bin/sh\necho master\n",
    workerUserData: "#!/bin/sh\necho worker\n",
    dns: { hostedZoneId: "Z0STANDIN00PUBLIC", name: "api.c1.example.com" },
  };
  const owned = (clusterId: string) => standin.world.live().filter((r) => r.tags.get(CLUSTER_TAG) === clusterId);
  const kinds = (clusterId: string) =>
    owned(clusterId)
      .map((r) => r.kind)
      .sort();

  it("creates the network, group, templates, masters across zones, workers, load balancer and record; a re-run adds nothing", async () => {
    const id = "11111111-1111-4111-8111-111111111111";
    const t = target(id);
    const state = await deployAll(t, spec);
    expect(kinds(id)).toEqual(
      [
        ...Array(7).fill("instance"),
        "launch-template",
        "launch-template",
        "load-balancer",
        "security-group",
        "subnet",
        "subnet",
        "subnet",
        "target-group",
        "vpc",
        "auto-scaling-group",
      ].sort(),
    );
    const masters = state.masterIds?.map((m) => standin.world.instances.get(m));
    expect(new Set(masters?.map((m) => m?.availabilityZone))).toEqual(new Set(spec.azs));
    expect([...standin.route53.records.values()].map((r) => [r.name, r.values])).toEqual([
      ["api.c1.example.com.", [state.loadBalancerDns]],
    ]);
    const userData = standin.world.launchTemplates.get(state.templates?.workers as string)?.userData as string;
    expect(Buffer.from(userData, "base64").toString()).toBe(spec.workerUserData);

    // A crash anywhere: every step run again, from nothing saved, finds what the first run made.
    const before = standin.world.live().length;
    const again = await deployAll(target(id), spec);
    expect(again).toEqual(state);
    expect(standin.world.live()).toHaveLength(before);
  });

  it("resumes from a crash between steps, resizes the group, and tears down only its own resources", async () => {
    const id = "22222222-2222-4222-8222-222222222222";
    const t = target(id);
    // The first three steps ran, then the control plane died; the cursor says which remain.
    let state: DeployState = {};
    for (const [, step] of DEPLOY_STEPS.slice(0, 3)) state = { ...state, ...(await step(t, spec, state)) };
    const withAutoscaler = { ...spec, dns: undefined, enableCAS: true, numMinWorkers: 2, numMaxWorkers: 6 };
    for (const [, step] of DEPLOY_STEPS.slice(3)) state = { ...state, ...(await step(t, withAutoscaler, state)) };
    const group = () => standin.autoScaling.groups.get(state.groupName as string);
    expect(group()).toMatchObject({ min: 2, max: 6, desired: 4 });
    expect(kinds(id).filter((k) => k === "instance")).toHaveLength(7);

    await resizeWorkers(t, { ...withAutoscaler, numMinWorkers: 1, numMaxWorkers: 2 });
    expect(group()).toMatchObject({ min: 1, max: 2, desired: 2 });
    await resizeWorkers(t, { ...spec, numWorkers: 5 });
    expect(group()).toMatchObject({ min: 5, max: 5, desired: 5 });

    const other = "11111111-1111-4111-8111-111111111111";
    const othersBefore = owned(other).length;
    await teardownAll(t, { deadline: Date.now() + 10_000 });
    expect(owned(id)).toEqual([]);
    expect(owned(other)).toHaveLength(othersBefore);
    // Run again (a crash mid-teardown): nothing left to delete, nothing deleted twice.
    const calls = standin.calls.length;
    await teardownAll(t, { deadline: Date.now() + 10_000 });
    const deletes = standin.calls.slice(calls).filter((c) => /^(Delete|Terminate)/.test(c.action));
    expect(deletes.map((c) => c.action)).toEqual(["DeleteAutoScalingGroup"]);
  });

  it("picks the workers a shrink removes: unregistered instances first, then the newest hosts", () => {
    const registered = new Map([
      ["i-a", "2026-11-26T10:00:00.000Z"],
      ["i-b", "2026-11-26T11:00:00.000Z"],
      ["i-c", "2026-11-26T10:30:00.000Z"],
      ["i-d", "2026-11-26T11:00:00.000Z"],
    ]);
    const group = ["i-a", "i-b", "i-c", "i-d", "i-e"];
    expect(pickRemoved(group, registered, 5)).toEqual([]);
    expect(pickRemoved(group, registered, 9)).toEqual([]);
    expect(pickRemoved(group, registered, 4)).toEqual(["i-e"]);
    // Same registration time: by instance id, so a second pick is the same.
    expect(pickRemoved(group, registered, 2)).toEqual(["i-e", "i-d", "i-b"]);
    expect(pickRemoved([...group].reverse(), registered, 2)).toEqual(["i-e", "i-d", "i-b"]);
    expect(pickRemoved(group, registered, 0)).toEqual(["i-e", "i-d", "i-b", "i-c", "i-a"]);
  });

  it("terminates the workers Keelson names, each once across a crash, with the group's desired capacity following", async () => {
    const id = "55555555-5555-4555-8555-555555555555";
    const t = target(id);
    await deployAll(t, { ...spec, dns: undefined, numMasters: 1, numWorkers: 4 });
    const before = await describeWorkerGroup(t);
    expect(before).toMatchObject({ minSize: 4, desired: 4 });
    const [kept, , gone1, gone2] = before?.instances ?? [];
    const removing = [gone1, gone2] as string[];
    const requestsBefore = standin.autoScaling.terminateRequests.length;

    // The control plane dies right after AWS accepted the first termination, before its progress was saved.
    const saved: string[] = [];
    await expect(
      terminateWorkers(t, removing, async () => {
        throw new Error("killed");
      }),
    ).rejects.toThrow("killed");
    await terminateWorkers(t, removing, async (instance) => {
      saved.push(instance);
    });
    // And once more after it finished (a crash before the step's end was recorded).
    await terminateWorkers(t, removing, async (instance) => {
      saved.push(instance);
    });
    expect(standin.autoScaling.terminateRequests.slice(requestsBefore)).toEqual(removing);
    expect(saved).toEqual([gone2]);
    for (const instance of removing) expect(standin.world.instances.get(instance)?.state).toBe("terminated");
    const after = await describeWorkerGroup(t);
    // The MinSize was lowered for the decrements; nothing was launched in their place.
    expect(after).toMatchObject({ minSize: 2, desired: 2 });
    expect(after?.instances).toContain(kept);
    expect(after?.instances.some((i) => removing.includes(i))).toBe(false);
    await resizeWorkers(t, { ...spec, numWorkers: 2 });
    expect(await describeWorkerGroup(t)).toEqual(after);
    await teardownAll(t, { deadline: Date.now() + 10_000 });
  });

  it("uses a VPC and subnets the request names and leaves them at teardown", async () => {
    const id = "33333333-3333-4333-8333-333333333333";
    const own = await deployAll(target("44444444-4444-4444-8444-444444444444"), {
      ...spec,
      dns: undefined,
      numMasters: 1,
      numWorkers: 0,
    });
    const state = await deployAll(target(id), {
      ...spec,
      dns: undefined,
      numMasters: 1,
      numWorkers: 1,
      vpc: own.vpcId as string,
      subnets: own.subnetIds as string[],
    });
    expect(state.vpcId).toBe(own.vpcId);
    expect(kinds(id)).not.toContain("vpc");
    expect(kinds(id)).not.toContain("subnet");
    await teardownAll(target(id), { deadline: Date.now() + 10_000 });
    expect(owned(id)).toEqual([]);
    expect(standin.world.vpcs.has(own.vpcId as string)).toBe(true);
  });
});
