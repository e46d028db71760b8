import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentEnvOf, manifestObjectOf } from "../../packages/control-plane/test/agent-manifest-env.ts";
import { fakeAgentPackage } from "../../packages/control-plane/test/agent-package-fixtures.ts";
import {
  IN_CLUSTER_IDENTITY_SECRET,
  IN_CLUSTER_REGISTRATION_ANNOTATION,
} from "../../packages/protocol/src/in-cluster-identity.ts";
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
 * error; a pod rescheduled elsewhere (its emptyDir state dir gone) links again with the identity
 * kept in the YAML's Secret, without registering; without the YAML's Role the agent runs on and its
 * report says the identity is not kept; deregistering ends the agent (exit 77, refused) and its
 * report goes with the cluster; registered again, the new YAML applied over the old Secret (its
 * data left there), the new pod registers with the new join token instead of restoring the deleted
 * identity.
 */
const ADMIN = "e2e-admin-token";

describe("the in-cluster agent of an external cluster", () => {
  let server: ServerProc;
  let standin: AwsStandin;
  let cluster: Awaited<ReturnType<typeof startInClusterApi>>;
  let agent: AgentProc | undefined;
  let projectId: string;
  let account: string;
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
    account = added.uuid;
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

  const identityPath = `/api/v1/namespaces/keelson-agent/secrets/${IN_CLUSTER_IDENTITY_SECRET}`;
  /**
   * What `kubectl apply -f` of the YAML does to the identity Secret already there: the fields the
   * YAML sets (its annotations) are set; the data it never sets stays.
   */
  const applyIdentitySecret = async (yaml: string) => {
    const fromYaml = manifestObjectOf(yaml, "Secret", IN_CLUSTER_IDENTITY_SECRET) as {
      metadata: { annotations?: Record<string, string> };
    };
    const now = (await cluster.kube("GET", identityPath)) as { metadata: Record<string, unknown> };
    await cluster.kube("PUT", identityPath, {
      ...now,
      metadata: { ...now.metadata, annotations: fromYaml.metadata.annotations },
    });
  };
  const keptInSecret = async () => {
    const data = ((await cluster.kube("GET", identityPath)) as { data?: Record<string, string> }).data ?? {};
    const text = (key: string) => Buffer.from(data[key] ?? "", "base64").toString();
    return { hostId: text("hostId"), registration: text("registration") };
  };

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
    await applyIdentitySecret(yaml.body);
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

  const hosts = async () =>
    (await api<{ id: string; info: { hostname: string } }[]>(`${server.url}/v1/hosts`, ADMIN)).body.filter(
      (h) => h.info.hostname === "payments",
    );
  /** A report newer than `since` from the linked agent, by `accept`. */
  const freshReport = (what: string, since: string | null, accept: (c: Listed) => boolean) =>
    waitUntil(
      `${what}\n${agent?.output()}`,
      async () => {
        const c = await listed();
        return c?.agent.connected && !c.agent.stale && c.agent.reportedAt !== since && accept(c) ? c : undefined;
      },
      60_000,
    );

  it("a pod rescheduled elsewhere (state dir gone) links again with the identity kept in its Secret, registering nothing", async () => {
    cluster.restoreToken();
    const before = agent?.hostId();
    expect(before).toBeTruthy();
    expect((await hosts()).map((h) => h.id)).toEqual([before]);
    await agent?.stop();
    const gone = await waitUntil(
      "the stopped agent's report shown stale",
      async () => {
        const c = await listed();
        return c?.agent.stale ? c : undefined;
      },
      30_000,
    );
    // Another node: a new emptyDir; the same env (the spent join token among it).
    rmSync(stateDir, { recursive: true, force: true });
    agent = await startInClusterAgent();
    const back = await freshReport(
      "the rescheduled agent's report",
      gone.agent.reportedAt,
      (c) => c.agent.healthy === true,
    );
    expect(back.agent).toMatchObject({ registered: true, connected: true, stale: false, error: null, nodeCount: 2 });
    expect(agent.hostId()).toBe(before);
    expect(agent.output()).toContain("identity restored from its Secret; no registration");
    expect(agent.output()).not.toContain("registered with the control plane");
    // No new host: the join token was not used again.
    expect((await hosts()).map((h) => h.id)).toEqual([before]);
  }, 120_000);

  it("without the YAML's Role the agent runs on, and its report says the identity is not kept; the Role back, it is", async () => {
    const rolePath = "/apis/rbac.authorization.k8s.io/v1/namespaces/keelson-agent/roles/keelson-agent";
    const role = (await cluster.kube("GET", rolePath)) as { metadata: Record<string, unknown> };
    await cluster.kube("DELETE", rolePath);
    await agent?.stop();
    agent = await startInClusterAgent();
    const since = (await listed())?.agent.reportedAt ?? null;
    const refused = await freshReport("the identity problem reported", since, (c) => c.agent.error !== null);
    expect(refused.agent.error).toContain(
      `the agent's identity cannot be kept: Secret ${IN_CLUSTER_IDENTITY_SECRET} cannot be read: GET /api/v1/namespaces/keelson-agent/secrets/${IN_CLUSTER_IDENTITY_SECRET}: the API answered 403: secrets "${IN_CLUSTER_IDENTITY_SECRET}" is forbidden: User "system:serviceaccount:keelson-agent:keelson-agent" cannot get resource "secrets"`,
    );
    expect(refused.agent).toMatchObject({ registered: true, connected: true, nodeCount: 2 });
    expect(agent.child.exitCode).toBeNull();
    expect(agent.output()).toContain("identity not kept in its Secret");

    const { resourceVersion: _rv, uid: _uid, creationTimestamp: _at, ...metadata } = role.metadata;
    await cluster.kube("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/keelson-agent/roles", {
      ...role,
      metadata,
    });
    await freshReport("the error gone with the Role back", refused.agent.reportedAt, (c) => c.agent.error === null);
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
    expect(running.output()).toContain(
      "is unknown to the control plane: the cluster was deregistered or its host deleted. Register the cluster again and apply its new deployment YAML",
    );
    expect(await listed()).toBeUndefined();
  }, 60_000);

  it("registered again, its new YAML applied over the old Secret: the new pod registers with the new join token, not with the deleted identity", async () => {
    const deleted = await keptInSecret();
    expect(deleted.hostId).toBeTruthy();
    const registered = await api<{ id: string }>(`${server.url}/v4/${projectId}/externalClusters/register`, ADMIN, {
      method: "POST",
      body: { id: "payments", provider: "eks", cloudProviderID: account, providerDetails: { region: "us-east-1" } },
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(200);
    const yaml = await api<string>(`${server.url}/v4/${projectId}/externalClusters/payments/deploymentYAML`, ADMIN);
    expect(yaml.status).toBe(200);
    await applyIdentitySecret(yaml.body);
    const { metadata } = manifestObjectOf(yaml.body, "Secret", IN_CLUSTER_IDENTITY_SECRET) as {
      metadata: { annotations: Record<string, string> };
    };
    const registration = metadata.annotations[IN_CLUSTER_REGISTRATION_ANNOTATION];
    expect(registration).toBeTruthy();
    expect(registration).not.toBe(deleted.registration);
    agentEnv = agentEnvOf(yaml.body, {
      KUBERNETES_SERVICE_HOST: cluster.host,
      KUBERNETES_SERVICE_PORT: String(cluster.port),
    });
    // The new pod template's annotation rolls out a new pod: a new emptyDir.
    rmSync(stateDir, { recursive: true, force: true });
    agent = await startInClusterAgent();
    const started = agent;
    const linked = await Promise.race([
      waitUntil(
        `the agent of the new registration linked\n${started.output()}`,
        async () => {
          const c = await listed();
          return c?.agent.registered && c.agent.connected && c.agent.healthy === true ? c : undefined;
        },
        60_000,
      ),
      started.exited.then((code) => {
        throw new Error(`the agent exited (${code}) instead of registering anew\n${started.output()}`);
      }),
    ]);
    expect(linked.agent).toMatchObject({ registered: true, connected: true, error: null, nodeCount: 2 });
    const renewed = started.hostId();
    expect(renewed).toBeTruthy();
    expect(renewed).not.toBe(deleted.hostId);
    expect((await hosts()).map((h) => h.id)).toEqual([renewed]);
    expect(started.output()).toContain("the identity in its Secret was kept under another registration");
    expect(started.output()).not.toContain("identity restored from its Secret");
    // Kept under the new registration: the next pod restores it.
    await waitUntil("the new identity kept in the Secret", async () => {
      const now = await keptInSecret();
      return now.hostId === renewed && now.registration === registration ? now : undefined;
    });
    expect(started.child.exitCode).toBeNull();
  }, 120_000);
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
