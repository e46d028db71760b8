import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentInstanceHost } from "../aws-standin/agent-host.ts";
import { type AwsStandin, startAwsStandin } from "../aws-standin/server.ts";
import { addStandinAwsAccount } from "./support/aws-account.ts";
import {
  killNodeServices,
  liveServicePids,
  type NodeHostDirs,
  nodeHostDirs,
  nodeHostEnv,
} from "./support/node-hosts.ts";
import { api, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * Auto deploy on AWS end to end, against the loopback stand-in (AWS_ENDPOINT_URL): cluster
 * create on an AWS node pool launches instances whose user data installs the agent with the
 * cluster's join token; the stand-in's instances run real `keelson-agent` processes (each a node
 * host of its own under a scratch dir), which register as their instances, are attached by the
 * operation (master first) and converge until the cluster is ok. Delete tears down every
 * resource the cluster made and forgets its hosts.
 */
describe("auto deploy on AWS (stand-in)", () => {
  let server: ServerProc;
  let standin: AwsStandin;
  let projectId: string;
  let nodePoolUuid: string;
  const scratch = tempDir("keelson-e2e-aws-deploy-");
  const dirs: Record<string, NodeHostDirs> = {};
  const ADMIN = "e2e-admin-token";

  beforeAll(async () => {
    const host = new AgentInstanceHost({ KEELSON_AGENT_RECONNECT_MAX_MS: "1000" }, (instance) => {
      const d = nodeHostDirs(join(scratch, instance.instanceId));
      dirs[instance.instanceId] = d;
      return nodeHostEnv(d, instance.privateIpAddress);
    });
    standin = await startAwsStandin({ instanceHost: host });
    server = await startServer({
      adminToken: ADMIN,
      env: { AWS_ENDPOINT_URL: standin.url, KEELSON_AGENT_HEARTBEAT_MS: "2000" },
    });
    ({ projectId, nodePoolUuid } = await addStandinAwsAccount(server.url, ADMIN));
  }, 120_000);

  afterAll(async () => {
    await standin?.close();
    await server?.stop();
    for (const d of Object.values(dirs)) killNodeServices(d);
    rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  const body = (extra: Record<string, unknown> = {}) => ({
    name: "auto-1",
    nodePoolUuid,
    region: "us-east-1",
    azs: ["us-east-1a"],
    ami: "ami-0123456789abcdef0",
    masterFlavor: "m5.large",
    workerFlavor: "m5.large",
    numMasters: 1,
    numWorkers: 1,
    httpProxy: "http://proxy.internal:3128",
    containersCidr: "10.80.0.0/16",
    servicesCidr: "10.81.0.0/16",
    ...extra,
  });
  const create = (b: Record<string, unknown>) =>
    api<{ uuid?: string; code?: string; field?: string }>(`${server.url}/v4/${projectId}/clusters`, ADMIN, {
      method: "POST",
      body: b,
    });

  const clusterOf = async (clusterId: string) =>
    (await api<Record<string, unknown>>(`${server.url}/v3/${projectId}/clusters/${clusterId}`, ADMIN)).body;

  /** Waits for the create to end: ok with healthy workers, or failed (then the error shows). */
  async function waitCreated(clusterId: string): Promise<void> {
    await waitUntil(
      "the auto-deployed cluster ok",
      async () => {
        const c = await clusterOf(clusterId);
        return (
          c.taskStatus === "error" || (c.status === "ok" && c.taskStatus === "success" && c.workerStatus === "healthy")
        );
      },
      300_000,
      1000,
    ).catch(async (err: Error) => {
      throw new Error(
        `${err.message}\ncluster: ${JSON.stringify(await clusterOf(clusterId))}\n${standin.world.hostErrors}`,
      );
    });
    expect((await clusterOf(clusterId)).taskError).toBe("");
  }

  const waitGone = (clusterId: string) =>
    waitUntil(
      "the cluster deleted",
      async () => (await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN)).status === 404,
      180_000,
      1000,
    );

  /** Deletes the cluster and waits until it is gone; then nothing it made is left in the cloud. */
  async function deleteAndCheck(clusterId: string): Promise<void> {
    const del = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN, { method: "DELETE" });
    expect(del.status).toBe(200);
    await waitGone(clusterId);
    expect(standin.world.live()).toEqual([]);
  }

  /** SIGKILLs the server as soon as the stand-in has been asked for `action` (since call `since`). */
  async function killAfter(action: string, since: number): Promise<void> {
    await waitUntil(
      `the ${action} call`,
      async () => standin.calls.slice(since).some((c) => c.action === action),
      120_000,
      20,
    );
    await server.stop("SIGKILL");
  }

  /** Starts the server again on the killed one's data and port, the stand-in at full speed again. */
  async function restart(): Promise<void> {
    standin.latencyMs = 0;
    server = await startServer({
      adminToken: ADMIN,
      dataDir: server.dataDir,
      port: Number(new URL(server.url).port),
      env: { AWS_ENDPOINT_URL: standin.url, KEELSON_AGENT_HEARTBEAT_MS: "2000" },
    });
  }

  it("refuses an AWS create missing what the cloud needs, naming the field, and changes nothing", async () => {
    for (const [extra, field] of [
      [{ ami: undefined }, "ami"],
      [{ ami: "ubuntu" }, "ami"],
      [{ azs: ["eu-west-1a"] }, "azs[0]"],
      [{ numMasters: 0 }, "numMasters"],
      [{ httpProxy: "proxy:3128/x" }, "httpProxy"],
    ] as const) {
      const res = await create(body(extra));
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.field).toBe(field);
    }
    expect((await api<unknown[]>(`${server.url}/v4/${projectId}/clusters`, ADMIN)).body).toEqual([]);
    expect(standin.world.live()).toEqual([]);
  });

  it("creates the cluster: instances boot agents that register, are attached master first, and the cluster is ok; a resize adds a worker and takes one away; delete leaves nothing", async () => {
    const res = await create(body());
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const clusterId = res.body.uuid as string;
    await waitCreated(clusterId);
    const running = [...standin.world.instances.values()].filter((i) => i.state === "running");
    expect(running).toHaveLength(2);
    // The launch templates' user data reads the instance id from IMDS and exports the proxy.
    const userData = Buffer.from([...standin.world.launchTemplates.values()][0]?.userData ?? "", "base64").toString();
    expect(userData).toContain("latest/meta-data/instance-id");
    expect(userData).toContain("export HTTPS_PROXY='http://proxy.internal:3128'");
    const nodes = (
      await api<{ uuid: string; isMaster: number; status: string; cloudInstanceId: string; clusterUuid: string }[]>(
        `${server.url}/v3/${projectId}/nodes`,
        ADMIN,
      )
    ).body.filter((n) => n.clusterUuid === clusterId);
    expect(nodes.map((n) => n.cloudInstanceId).sort()).toEqual(running.map((i) => i.instanceId).sort());
    expect(nodes.map((n) => n.isMaster).sort()).toEqual([0, 1]);
    const masterInstance = nodes.find((n) => n.isMaster === 1)?.cloudInstanceId;
    expect(running.find((i) => i.instanceId === masterInstance)?.autoScalingGroup).toBeUndefined();
    expect(nodes.every((n) => n.status === "ok")).toBe(true);

    // One worker more: the group launches an instance whose host registers, is attached and joins.
    const grow = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN, {
      method: "PUT",
      body: { numWorkers: 2 },
    });
    expect(grow.status, JSON.stringify(grow.body)).toBe(200);
    await waitCreated(clusterId);
    const grown = (
      await api<{ isMaster: number; status: string; cloudInstanceId: string; clusterUuid: string }[]>(
        `${server.url}/v3/${projectId}/nodes`,
        ADMIN,
      )
    ).body.filter((n) => n.clusterUuid === clusterId);
    expect(grown.filter((n) => n.isMaster === 0 && n.status === "ok")).toHaveLength(2);
    expect([...standin.world.instances.values()].filter((i) => i.state === "running")).toHaveLength(3);
    const newest = grown.find(
      (n) => n.isMaster === 0 && !nodes.some((old) => old.cloudInstanceId === n.cloudInstanceId),
    )?.cloudInstanceId as string;
    expect(Object.keys(liveServicePids(dirs[newest] as NodeHostDirs))).not.toEqual([]);
    const terminationsBefore = standin.autoScaling.terminateRequests.length;

    // And back: Keelson picks the newest worker, it leaves the cluster clean (its services
    // stopped), then its instance alone is terminated with the group's desired capacity
    // decremented, and the cluster forgets its host.
    const shrink = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN, {
      method: "PUT",
      body: { numWorkers: 1 },
    });
    expect(shrink.status, JSON.stringify(shrink.body)).toBe(200);
    await waitCreated(clusterId);
    const stillRunning = [...standin.world.instances.values()].filter((i) => i.state === "running");
    expect(stillRunning).toHaveLength(2);
    const shrunk = (
      await api<{ cloudInstanceId: string; clusterUuid: string }[]>(`${server.url}/v3/${projectId}/nodes`, ADMIN)
    ).body.filter((n) => n.clusterUuid === clusterId);
    expect(shrunk.map((n) => n.cloudInstanceId).sort()).toEqual(stillRunning.map((i) => i.instanceId).sort());
    expect(standin.autoScaling.terminateRequests.slice(terminationsBefore)).toEqual([newest]);
    expect(standin.world.instances.get(newest)?.state).toBe("terminated");
    expect(liveServicePids(dirs[newest] as NodeHostDirs)).toEqual({});
    expect([...standin.autoScaling.groups.values()].map((g) => g.desired)).toEqual([1]);

    await deleteAndCheck(clusterId);
    const left = (await api<{ cloudInstanceId: string }[]>(`${server.url}/v3/${projectId}/nodes`, ADMIN)).body;
    expect(left.filter((n) => n.cloudInstanceId !== "")).toEqual([]);
  }, 600_000);

  it("resumes a create cut off by SIGKILL of the server from its cursor, launching no instance twice", async () => {
    const before = standin.world.instances.size;
    const callsBefore = standin.calls.length;
    standin.latencyMs = 150;
    const res = await create(body({ name: "auto-2", httpProxy: undefined }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const clusterId = res.body.uuid as string;
    // Killed right after EC2 was asked for the master: its answer may never have been saved.
    await killAfter("RunInstances", callsBefore);
    await restart();
    await waitCreated(clusterId);
    // One master and one worker, ever: the resumed step found the first launch by its client token.
    expect(standin.world.instances.size - before).toBe(2);

    await deleteAndCheck(clusterId);
  }, 600_000);

  it("resumes a delete cut off by SIGKILL of the server: every resource deleted once, nothing left", async () => {
    const res = await create(body({ name: "auto-3", httpProxy: undefined }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const clusterId = res.body.uuid as string;
    await waitCreated(clusterId);
    const callsBefore = standin.calls.length;
    standin.latencyMs = 150;
    const del = await api(`${server.url}/v4/${projectId}/clusters/${clusterId}`, ADMIN, { method: "DELETE" });
    expect(del.status).toBe(200);
    // Killed in the middle of the teardown: the worker group is going, the rest is still there.
    await killAfter("DeleteAutoScalingGroup", callsBefore);
    expect(standin.world.live()).not.toEqual([]);
    await restart();
    await waitGone(clusterId);
    expect(standin.world.live()).toEqual([]);
    // Each resource was deleted by one accepted request; a resumed step found it gone and asked no more.
    const RESOURCE =
      /^(VpcId|SubnetId|GroupId|LaunchTemplateId|AutoScalingGroupName|LoadBalancerArn|TargetGroupArn|InstanceIds\.\d+)$/;
    const deleted = standin.calls
      .slice(callsBefore)
      .filter((c) => /^(Delete|Terminate)/.test(c.action) && c.status === 200)
      .flatMap((c) =>
        Object.entries(c.params)
          .filter(([key]) => RESOURCE.test(key))
          .map(([, id]) => id),
      );
    expect(deleted.length).toBeGreaterThan(5);
    expect(deleted.filter((id, i) => deleted.indexOf(id) !== i)).toEqual([]);
    const left = (await api<{ cloudInstanceId: string }[]>(`${server.url}/v3/${projectId}/nodes`, ADMIN)).body;
    expect(left.filter((n) => n.cloudInstanceId !== "")).toEqual([]);
  }, 600_000);
});
