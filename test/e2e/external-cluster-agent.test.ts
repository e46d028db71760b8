import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEnvOf } from "../../packages/control-plane/test/agent-manifest-env.ts";
import { fakeAgentPackage } from "../../packages/control-plane/test/agent-package-fixtures.ts";
import { type AwsStandin, startAwsStandin } from "../aws-standin/server.ts";
import { REPORTED_NODES, startInClusterApi } from "../support/incluster-cluster.ts";
import { type AgentProc, startAgent } from "./support/agents.ts";
import { addStandinAwsAccount } from "./support/aws-account.ts";
import { api, type ServerProc, startServer, tempDir, waitUntil } from "./support/processes.ts";

/**
 * An external cluster's agent end to end, with real processes: keelson-server with the EKS
 * cluster `payments` registered (AWS stand-in), its deployment YAML downloaded, and a real
 * keelson-agent started with exactly the env that YAML gives the agent container (plus what
 * Kubernetes sets in a pod) and a service-account dir as Kubernetes mounts it, for the strict
 * stand-in kube-apiserver serving two Nodes under the YAML's own RBAC. The API then lists the
 * version, nodes and health the agent read; a token the API refuses is the cluster's health
 * error; deregistering ends the agent (exit 77, refused) and its report goes with the cluster.
 */
const ADMIN = "e2e-admin-token";

describe("the in-cluster agent of an external cluster", () => {
  let server: ServerProc;
  let standin: AwsStandin;
  let cluster: Awaited<ReturnType<typeof startInClusterApi>>;
  let agent: AgentProc | undefined;
  let projectId: string;
  let agentEnv: Record<string, string> = {};
  const stateDir = tempDir("keelson-e2e-incluster-state-");
  /** The agent as the pod runs it: the YAML's env; the pod's emptyDir and service-account mount are the test's dirs. */
  const startInClusterAgent = () =>
    startAgent({
      name: "payments",
      controlPlane: agentEnv.KEELSON_CONTROL_PLANE as string,
      stateDir,
      env: {
        ...agentEnv,
        KEELSON_STATE_DIR: stateDir,
        KEELSON_SERVICE_ACCOUNT_DIR: cluster.serviceAccountDir,
        KEELSON_AGENT_CLUSTER_REPORT_MS: "500",
      },
    });

  beforeAll(async () => {
    standin = await startAwsStandin();
    cluster = await startInClusterApi();
    server = await startServer({ adminToken: ADMIN, env: { AWS_ENDPOINT_URL: standin.url } });
    const added = await addStandinAwsAccount(server.url, ADMIN);
    projectId = added.projectId;
    const account = added.uuid;
    const registered = await api(`${server.url}/v4/${projectId}/externalClusters/register`, ADMIN, {
      method: "POST",
      body: { id: "payments", provider: "eks", cloudProviderID: account, providerDetails: { region: "us-east-1" } },
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(200);
    const upload = await fetch(`${server.url}/v1/agentPackages`, {
      method: "POST",
      headers: { "x-auth-token": ADMIN, "content-type": "application/octet-stream" },
      body: new Uint8Array(fakeAgentPackage("1.4.0")),
    });
    expect(upload.status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    await agent?.stop();
    await server?.stop();
    await standin?.close();
    cluster?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }, 60_000);

  const listed = async () => {
    const res = await api<Listed[]>(`${server.url}/v1/projects/${projectId}/externalClusters`, ADMIN);
    return res.body.find((c) => c.id === "payments");
  };

  it("reports the cluster's version, nodes and health read with the pod's service account; a refused token is the health error", async () => {
    const yaml = await api<string>(`${server.url}/v4/${projectId}/externalClusters/payments/deploymentYAML`, ADMIN);
    expect(yaml.status).toBe(200);
    agentEnv = agentEnvOf(yaml.body, {
      KUBERNETES_SERVICE_HOST: cluster.host,
      KUBERNETES_SERVICE_PORT: String(cluster.port),
    });
    expect(agentEnv.KEELSON_AGENT_MODE).toBe("in-cluster");
    expect((await listed())?.agent).toMatchObject({ registered: false, connected: false, reportedAt: null });
    agent = await startInClusterAgent();
    const first = await waitUntil(
      `the agent's report listed\n${agent.output()}`,
      async () => {
        const c = await listed();
        // The link's connected flag is written with the presence batch, a moment after the
        // report the agent sends on its welcome.
        return c?.agent.healthy === true && c.agent.connected ? c : undefined;
      },
      60_000,
    );
    expect(first.kubernetesVersion).toMatch(/^v1\.\d+\.\d+/);
    expect(first.agent).toMatchObject({
      registered: true,
      connected: true,
      stale: false,
      error: null,
      nodeCount: 2,
      readyNodes: 1,
    });
    expect(first.agent.nodes).toEqual(REPORTED_NODES);
    // No host interface: nothing listens on the agent's local API address.
    await expect(fetch(`http://${agent.listen}/v1/hosts`)).rejects.toThrow();

    cluster.forgeToken();
    const refused = await waitUntil(
      "the refused token reported",
      async () => {
        const c = await listed();
        return c?.agent.healthy === false ? c : undefined;
      },
      30_000,
    );
    expect(refused.agent.error).toContain("GET /version: the API answered 401: Unauthorized");
    expect(refused.agent.connected).toBe(true);
    expect(agent.child.exitCode).toBeNull();
  }, 120_000);

  it("the report of an agent that is gone is shown stale; back, it is fresh again", async () => {
    await agent?.stop();
    const stale = await waitUntil(
      "the stopped agent's report shown stale",
      async () => {
        const c = await listed();
        return c?.agent.stale ? c : undefined;
      },
      30_000,
    );
    expect(stale.agent).toMatchObject({ registered: true, connected: false, healthy: false, nodeCount: null });
    expect(stale.agent.reportedAt).not.toBeNull();
    // Restarted on its state dir (the spent join token is not needed again): it reports on its welcome.
    agent = await startInClusterAgent();
    const fresh = await waitUntil(
      `the restarted agent's report\n${agent.output()}`,
      async () => {
        const c = await listed();
        return c?.agent.connected && !c.agent.stale && c.agent.reportedAt !== stale.agent.reportedAt ? c : undefined;
      },
      60_000,
    );
    expect(fresh.agent.error).toContain("401");
  }, 120_000);

  it("deregister ends the agent's link: it exits refused, and the cluster and its report are gone", async () => {
    const running = agent as AgentProc;
    const res = await api(`${server.url}/v4/${projectId}/externalClusters/payments/deregister`, ADMIN, {
      method: "POST",
    });
    expect(res.status).toBe(200);
    // 77: refused by the control plane (upgrade/ipc.ts AUTH_EXIT_CODE), not a crash.
    expect(await Promise.race([running.exited, new Promise((r) => setTimeout(() => r("still running"), 20_000))])).toBe(
      77,
    );
    expect(running.output()).toMatch(/the control plane refused this agent/);
    expect(await listed()).toBeUndefined();
  }, 60_000);
});

interface Listed {
  id: string;
  kubernetesVersion: string | null;
  agent: {
    registered: boolean;
    connected: boolean;
    stale: boolean;
    reportedAt: string | null;
    healthy: boolean | null;
    error: string | null;
    nodeCount: number | null;
    readyNodes: number | null;
    nodes: unknown[] | null;
  };
}
