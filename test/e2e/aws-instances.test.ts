import {
  CreateLaunchTemplateCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  EC2Client,
  RunInstancesCommand,
  TerminateInstancesCommand,
} from "@aws-sdk/client-ec2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentInstanceHost } from "../aws-standin/agent-host.ts";
import { type AwsStandin, STANDIN_KEYS, startAwsStandin } from "../aws-standin/server.ts";
import { issueJoinToken } from "./support/join-tokens.ts";
import { api, type ServerProc, startServer, waitUntil } from "./support/processes.ts";

/**
 * The AWS stand-in's instances boot real agents: user data holding a join token's install
 * command (as an auto deploy's launch template will) starts `keelson-agent` on the instance's
 * own loopback address; it registers with the control plane under the EC2-style host name and
 * reports that address; TerminateInstances stops it, and so does closing the stand-in.
 */
describe("AWS stand-in instances run keelson-agent", () => {
  let server: ServerProc;
  let standin: AwsStandin;
  let host: AgentInstanceHost;
  let ec2: EC2Client;
  let projectId: string;

  beforeAll(async () => {
    server = await startServer();
    host = new AgentInstanceHost({ KEELSON_AGENT_RECONNECT_MAX_MS: "1000" });
    standin = await startAwsStandin({ instanceHost: host });
    ec2 = new EC2Client({
      region: "us-east-1",
      endpoint: standin.url,
      credentials: { accessKeyId: STANDIN_KEYS.key, secretAccessKey: STANDIN_KEYS.secret },
    });
    const projects = await api<{ projects: { id: string; name: string }[] }>(
      `${server.url}/v1/projects`,
      server.adminToken,
    );
    projectId = projects.body.projects.find((p) => p.name === "default")?.id as string;
  }, 60_000);
  afterAll(async () => {
    ec2?.destroy();
    await standin?.close();
    await server?.stop();
  });

  const nodes = async () =>
    (
      await api<{ uuid: string; name: string; agentConnected: boolean; primaryIp?: string }[]>(
        `${server.url}/v4/${projectId}/nodes`,
        server.adminToken,
      )
    ).body;

  it("boots an agent per instance from user data, and stops it at termination and at close", async () => {
    const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: "10.0.0.0/16" }));
    const subnet = await ec2.send(
      new CreateSubnetCommand({ VpcId: vpc.Vpc?.VpcId, CidrBlock: "10.0.1.0/24", AvailabilityZone: "us-east-1a" }),
    );
    const template = await ec2.send(
      new CreateLaunchTemplateCommand({
        LaunchTemplateName: "nodes",
        LaunchTemplateData: { InstanceType: "m5.large" },
      }),
    );
    const launch = async () => {
      const { installCommand } = await issueJoinToken(server, projectId);
      expect(installCommand).toBeTruthy();
      const userData = Buffer.from(`#!/bin/sh\nset -e\n${installCommand}\n`).toString("base64");
      const run = await ec2.send(
        new RunInstancesCommand({
          MinCount: 1,
          MaxCount: 1,
          SubnetId: subnet.Subnet?.SubnetId,
          LaunchTemplate: { LaunchTemplateId: template.LaunchTemplate?.LaunchTemplateId },
          UserData: userData,
        }),
      );
      return run.Instances?.[0] as { InstanceId: string; PrivateIpAddress: string };
    };
    const [a, b] = [await launch(), await launch()];
    const nameOf = (ip: string) => `ip-${ip.replaceAll(".", "-")}`;
    expect(a.PrivateIpAddress).not.toBe(b.PrivateIpAddress);
    await waitUntil(
      "both instances' agents connected",
      async () => {
        const list = await nodes();
        return [a, b].every((i) => list.some((n) => n.name === nameOf(i.PrivateIpAddress) && n.agentConnected));
      },
      60_000,
    ).catch(async (err: Error) => {
      const outputs = [...host.agents.values()].map((b) => b.agent.output().slice(-2000));
      throw new Error(
        `${err.message}\nnodes: ${JSON.stringify(await nodes())}\nidle: ${host.idle}, errors: ${standin.world.hostErrors}\n${outputs.join("\n---\n")}`,
      );
    });
    const booted = host.agents.get(a.InstanceId);
    expect(booted?.agent.listen.startsWith(`${a.PrivateIpAddress}:`)).toBe(true);

    await ec2.send(new TerminateInstancesCommand({ InstanceIds: [a.InstanceId] }));
    await booted?.agent.exited;
    expect(host.agents.has(a.InstanceId)).toBe(false);
    await waitUntil(
      "the terminated instance's agent disconnected",
      async () => (await nodes()).some((n) => n.name === nameOf(a.PrivateIpAddress) && !n.agentConnected),
      30_000,
    );

    const other = host.agents.get(b.InstanceId)?.agent;
    await standin.close();
    expect(other?.child.exitCode !== null || other?.child.signalCode !== null).toBe(true);
    expect(host.agents.size).toBe(0);
  }, 120_000);
});
