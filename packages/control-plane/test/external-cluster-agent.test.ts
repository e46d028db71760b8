import type { AddressInfo } from "node:net";
import { externalClusters, joinTokens, nodes } from "@keelson/db";
import { AGENT_LINK_PATH, IN_CLUSTER_IDENTITY_SECRET, IN_CLUSTER_REGISTRATION_ANNOTATION } from "@keelson/protocol";
import { eq } from "drizzle-orm";
import { Deployment } from "kubernetes-models/apps/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ConfigMap, Namespace, Secret, ServiceAccount } from "kubernetes-models/v1";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import type { AwsStandin } from "../../../test/aws-standin/server.ts";
import { SimAgent } from "../../../test/sim/agent.ts";
import { agentManifestObjects } from "../src/domain/external-clusters/agent-manifest.ts";
import { HostAuthenticator } from "../src/domain/hosts/host-auth.ts";
import { fakeAgentPackage, sha256 } from "./agent-package-fixtures.ts";
import { appWithAwsAccount } from "./aws-app-fixtures.ts";
import { ADMIN_TOKEN, type TestApp } from "./helpers.ts";

/**
 * The agent of an external cluster: its deployment YAML (validated with kubernetes-models, the
 * Kubernetes API's own schemas compiled per kind: types, required fields, formats) and what
 * deregistering does to it. kubernetes-models was chosen over a JSON-schema package because it
 * is kept up with Kubernetes releases, ships the schemas of every built-in kind with a validator,
 * and gives TypeScript types, which agent-manifest.ts uses so that an unknown field fails the
 * typecheck (the schemas, like the API's OpenAPI, do not refuse unknown fields themselves).
 */
const VALIDATORS: Record<string, (o: never) => { validate(): void }> = {
  Namespace: (o) => new Namespace(o),
  ServiceAccount: (o) => new ServiceAccount(o),
  ClusterRole: (o) => new ClusterRole(o),
  ClusterRoleBinding: (o) => new ClusterRoleBinding(o),
  Role: (o) => new Role(o),
  RoleBinding: (o) => new RoleBinding(o),
  Secret: (o) => new Secret(o),
  ConfigMap: (o) => new ConfigMap(o),
  Deployment: (o) => new Deployment(o),
};

function validate(object: Record<string, unknown>): void {
  const make = VALIDATORS[object.kind as string];
  if (!make) throw new Error(`no validator for kind ${String(object.kind)}`);
  make(object as never).validate();
}

describe("an external cluster's agent", () => {
  let t: TestApp;
  let standin: AwsStandin;
  let aws: string;
  let clusterId: string;
  const p = () => t.projectId;
  const yamlUrl = (id = clusterId) => `/v4/${p()}/externalClusters/${id}/deploymentYAML`;
  const getYaml = (id = clusterId, token?: string | null) => t.request({ method: "GET", url: yamlUrl(id), token });
  const docs = (body: string) => parseAllDocuments(body).map((d) => d.toJS() as Record<string, unknown>);
  const tokenOf = (objects: Record<string, unknown>[]) =>
    (objects.find((o) => o.kind === "Secret") as { stringData: { KEELSON_JOIN_TOKEN: string } }).stringData
      .KEELSON_JOIN_TOKEN;
  const registerAgent = (joinToken: string) =>
    t.request({
      method: "POST",
      url: "/v1/agents/register",
      payload: { joinToken, hostname: "payments" },
      token: null,
    });

  beforeAll(async () => {
    ({ t, standin, aws } = await appWithAwsAccount());
  });
  afterAll(async () => {
    await t.close();
    await standin.close();
  });
  beforeEach(async () => {
    await t.db.delete(joinTokens).where(eq(joinTokens.projectId, p()));
    await t.db.delete(externalClusters);
    const res = await t.request({
      method: "POST",
      url: `/v4/${p()}/externalClusters/register`,
      payload: { id: "payments", provider: "eks", cloudProviderID: aws, providerDetails: { region: "us-east-1" } },
    });
    expect(res.statusCode).toBe(200);
    const [row] = await t.db.select().from(externalClusters);
    clusterId = (row as { id: string }).id;
  });

  describe("deploymentYAML", () => {
    // This first test stores the agent package the later ones deploy.
    it("is 404 while no agent package is stored, and for an unknown cluster", async () => {
      const none = await getYaml();
      expect(none.statusCode).toBe(404);
      expect(none.json().message).toMatch(/no agent package is stored/);
      expect(await t.db.select().from(joinTokens)).toHaveLength(0);
      const upload = await t.request({
        method: "POST",
        url: "/v1/agentPackages",
        payload: fakeAgentPackage("1.4.0"),
        headers: { "content-type": "application/octet-stream" },
        token: ADMIN_TOKEN,
      });
      expect(upload.statusCode).toBe(200);
      const unknown = await getYaml("no-such-cluster");
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().code).toBe("not_found");
    });

    it("answers a manifest whose every object validates against the Kubernetes API schemas", async () => {
      const res = await getYaml();
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toBe("application/octet-stream");
      const objects = docs(res.body);
      expect(objects.map((o) => o.kind)).toEqual([
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Secret",
        "Secret",
        "ConfigMap",
        "Deployment",
      ]);
      for (const object of objects) validate(object);
      // By the provider's id too.
      expect((await getYaml("payments")).statusCode).toBe(200);
    });

    it("the validation refuses a broken object (the check can fail)", () => {
      const objects = agentManifestObjects({
        clusterName: "payments",
        clusterId: "c",
        controlPlane: "http://127.0.0.1:8080",
        caHash: null,
        caPem: null,
        joinToken: "kjt_x",
        agentPackage: { version: "1.4.0", sha256: sha256("x"), sizeBytes: 1, storedAt: "" },
      });
      const deployment = structuredClone(objects.at(-1)) as { spec: { replicas: unknown } };
      deployment.spec.replicas = "one";
      expect(() => validate(deployment as never)).toThrow(/replicas must be integer/);
      const role = structuredClone(objects[2]) as { rules: { verbs?: unknown }[] };
      delete role.rules[0]?.verbs;
      expect(() => validate(role as never)).toThrow(/rules\/0 must have required property.*verbs/);
    });

    it("grants the agent only reading nodes, /version and health", async () => {
      const objects = docs((await getYaml()).body);
      const role = objects.find((o) => o.kind === "ClusterRole") as { rules: unknown[] };
      expect(role.rules).toEqual([
        { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list"] },
        { nonResourceURLs: ["/version", "/readyz", "/livez"], verbs: ["get"] },
      ]);
      const binding = objects.find((o) => o.kind === "ClusterRoleBinding") as Record<string, unknown>;
      expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "keelson-agent", namespace: "keelson-agent" }]);
      const deployment = objects.find((o) => o.kind === "Deployment") as {
        spec: { template: { spec: { serviceAccountName: string; containers: { env: { name: string }[] }[] } } };
      };
      expect(deployment.spec.template.spec.serviceAccountName).toBe("keelson-agent");
      const env = deployment.spec.template.spec.containers[0]?.env ?? [];
      expect(env).toContainEqual({ name: "KEELSON_AGENT_MODE", value: "in-cluster" });
      const config = objects.find((o) => o.kind === "ConfigMap") as { data: Record<string, string> };
      expect(config.data).toMatchObject({ KEELSON_AGENT_VERSION: "1.4.0" });
    });

    it("lets the agent get and update its identity Secret, which it creates empty, and no other Secret", async () => {
      const objects = docs((await getYaml()).body);
      const role = objects.find((o) => o.kind === "Role") as { metadata: { namespace: string }; rules: unknown[] };
      expect(role.metadata.namespace).toBe("keelson-agent");
      expect(role.rules).toEqual([
        {
          apiGroups: [""],
          resources: ["secrets"],
          resourceNames: [IN_CLUSTER_IDENTITY_SECRET],
          verbs: ["get", "update"],
        },
      ]);
      const binding = objects.find((o) => o.kind === "RoleBinding") as Record<string, unknown>;
      expect(binding.metadata).toMatchObject({ name: "keelson-agent", namespace: "keelson-agent" });
      expect(binding.roleRef).toEqual({ apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "keelson-agent" });
      expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: "keelson-agent", namespace: "keelson-agent" }]);
      const secret = objects.find(
        (o) => o.kind === "Secret" && (o.metadata as { name: string }).name === IN_CLUSTER_IDENTITY_SECRET,
      );
      expect(secret).toMatchObject({ type: "Opaque", metadata: { namespace: "keelson-agent" } });
      expect(secret).not.toHaveProperty("data");
      expect(secret).not.toHaveProperty("stringData");
      // The registration the agent keeps its identity under (identity-secret.ts), and a new pod per registration.
      const registration = { [IN_CLUSTER_REGISTRATION_ANNOTATION]: clusterId };
      expect(secret).toMatchObject({ metadata: { annotations: registration } });
      const deployment = objects.find((o) => o.kind === "Deployment") as {
        spec: { template: { metadata: { annotations?: unknown } } };
      };
      expect(deployment.spec.template.metadata.annotations).toEqual(registration);
    });

    it("carries a join token minted for the cluster; a newer manifest replaces an unspent one", async () => {
      const first = tokenOf(docs((await getYaml()).body));
      const second = tokenOf(docs((await getYaml()).body));
      expect(second).not.toBe(first);
      const rows = await t.db.select().from(joinTokens).where(eq(joinTokens.externalClusterId, clusterId));
      expect(rows).toHaveLength(1);
      expect((await registerAgent(first)).statusCode).toBe(403);
      const registered = await registerAgent(second);
      expect(registered.statusCode).toBe(201);
      // Spent: the agent's own registration is kept by the next manifest.
      await getYaml();
      const after = await t.db.select().from(joinTokens).where(eq(joinTokens.externalClusterId, clusterId));
      expect(after.map((r) => r.usedByNodeId)).toContain(registered.json().hostId);
    });

    it("answers 403 without a project admin's token", async () => {
      for (const token of [null, "not-a-token", t.otherToken]) {
        expect((await getYaml(clusterId, token)).statusCode).toBe(403);
      }
      expect(await t.db.select().from(joinTokens)).toHaveLength(0);
    });
  });

  describe("deregister", () => {
    const deregister = (id = clusterId, token?: string | null) =>
      t.request({ method: "POST", url: `/v4/${p()}/externalClusters/${id}/deregister`, token });

    it("removes the cluster, its tokens and its agent; the agent's link closes and its credential is dead", async () => {
      await t.app.listen({ host: "127.0.0.1", port: 0 });
      const { port } = t.app.server.address() as AddressInfo;
      const joinToken = tokenOf(docs((await getYaml()).body));
      const registered = (await registerAgent(joinToken)).json() as { hostId: string; credential: string };
      const auth = new HostAuthenticator(t.db);
      const bearer = { authorization: `Bearer ${registered.credential}` };
      expect((await auth.authenticate(bearer)).ok).toBe(true);
      const agent = new SimAgent({
        index: 1,
        hostname: "payments",
        hostId: registered.hostId,
        credential: registered.credential,
        linkUrl: `ws://127.0.0.1:${port}${AGENT_LINK_PATH}`,
        behaviour: { latencyMs: 0, failureRate: 0, random: Math.random, reconnect: true, phaseTimeMs: 0 },
      });
      try {
        expect(await agent.connect(10_000)).toBe(true);
        const res = await deregister();
        expect(res.statusCode).toBe(200);
        const deadline = Date.now() + 5_000;
        while (!agent.fatal && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect(agent.fatal?.code).toBe(4401);
        expect((await auth.authenticate(bearer)).ok).toBe(false);
        expect(await t.db.select().from(nodes).where(eq(nodes.id, registered.hostId))).toHaveLength(0);
        expect(await t.db.select().from(joinTokens).where(eq(joinTokens.externalClusterId, clusterId))).toHaveLength(0);
        expect(await t.db.select().from(externalClusters)).toHaveLength(0);
        // It is in discover again.
        const ids = (await t.request({ method: "GET", url: `/v4/${p()}/externalClusters/discover` })).json();
        expect(ids.map((c: { id: string }) => c.id)).toContain("payments");
      } finally {
        await agent.stop();
      }
    });

    it("answers 404 for an unknown cluster and 403 without a member's token, changing nothing", async () => {
      expect((await deregister("no-such-cluster")).statusCode).toBe(404);
      for (const token of [null, "not-a-token", t.otherToken]) {
        expect((await deregister(clusterId, token)).statusCode).toBe(403);
      }
      expect(await t.db.select().from(externalClusters)).toHaveLength(1);
    });
  });
});
