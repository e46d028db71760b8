import { cpSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPORTED_NODES, startInClusterApi } from "../../../../test/support/incluster-cluster.ts";
import { agentManifest } from "../../../control-plane/src/domain/external-clusters/agent-manifest.ts";
import { agentEnvOf } from "../../../control-plane/test/agent-manifest-env.ts";
import { inClusterCredentials, readCluster } from "../../src/in-cluster/cluster-reading.ts";
import { readAgentSettings } from "../../src/settings.ts";

/**
 * The in-cluster agent's reading of its cluster, against the strict stand-in kube-apiserver with
 * the deployment YAML's own RBAC and a service-account token from the TokenRequest API.
 */

let api: Awaited<ReturnType<typeof startInClusterApi>>;

beforeAll(async () => {
  api = await startInClusterApi();
}, 60_000);
afterAll(() => api?.stop());

describe("the in-cluster agent's settings", () => {
  it("take the manifest's env and what Kubernetes sets in a pod", () => {
    const yaml = agentManifest({
      clusterName: "payments",
      clusterId: "c",
      controlPlane: "https://keelson.example:8443",
      caHash: `sha256:${"a".repeat(64)}`,
      caPem: null,
      joinToken: "kjt_x",
      agentPackage: { version: "1.4.0", sha256: "0".repeat(64), sizeBytes: 1, storedAt: "" },
    });
    const env = agentEnvOf(yaml, { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" });
    const settings = readAgentSettings(env);
    expect(settings).toMatchObject({
      mode: "in-cluster",
      controlPlanes: ["https://keelson.example:8443"],
      joinToken: "kjt_x",
      hostname: "payments",
      stateDir: "/var/lib/keelson-agent",
      inCluster: {
        host: "10.96.0.1",
        port: 443,
        serviceAccountDir: "/var/run/secrets/kubernetes.io/serviceaccount",
      },
    });
    expect(inClusterCredentials(settings.inCluster!).url).toBe("https://10.96.0.1:443");
    expect(readAgentSettings({ ...env, KUBERNETES_SERVICE_HOST: "fd00::1" }).inCluster?.host).toBe("fd00::1");
    expect(inClusterCredentials({ host: "fd00::1", port: 443, serviceAccountDir: "/s" }).url).toBe(
      "https://[fd00::1]:443",
    );
  });

  it("refuse in-cluster mode outside a pod (no KUBERNETES_SERVICE_HOST/PORT); host mode needs neither", () => {
    const env = { KEELSON_CONTROL_PLANE: "http://127.0.0.1:8080", KEELSON_AGENT_MODE: "in-cluster" };
    expect(() => readAgentSettings(env)).toThrow(
      "KEELSON_AGENT_MODE=in-cluster needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT",
    );
    expect(() => readAgentSettings({ ...env, KEELSON_AGENT_MODE: "pod" })).toThrow(/KEELSON_AGENT_MODE/);
    const host = readAgentSettings({ KEELSON_CONTROL_PLANE: "http://127.0.0.1:8080" });
    expect(host.mode).toBe("host");
    expect(host.inCluster).toBeUndefined();
  });
});

describe("reading the cluster's API with the service account", () => {
  it("reads the version, every node (roles, Ready, kubelet, InternalIP) and health", async () => {
    const credentials = inClusterCredentials({
      host: api.host,
      port: api.port,
      serviceAccountDir: api.serviceAccountDir,
    });
    const report = await readCluster(credentials, 5_000);
    expect(report.error).toBeUndefined();
    expect(report.healthy).toBe(true);
    expect(report.kubernetesVersion).toMatch(/^v1\.\d+\.\d+/);
    expect(report.nodes).toEqual(REPORTED_NODES);
  });

  it("a token the API refuses is the report's error (401), nothing read, not a throw", async () => {
    const dir = `${api.serviceAccountDir}-forged`;
    cpSync(api.serviceAccountDir, dir, { recursive: true });
    writeFileSync(`${dir}/token`, "kct_forged");
    const report = await readCluster(
      inClusterCredentials({ host: api.host, port: api.port, serviceAccountDir: dir }),
      5_000,
    );
    expect(report).toMatchObject({ healthy: false, kubernetesVersion: null, nodes: null });
    expect(report.error).toContain("GET /version: the API answered 401: Unauthorized");
    expect(report.error).toContain("GET /api/v1/nodes: the API answered 401");
  });

  it("an API nobody answers is the report's error too", async () => {
    const report = await readCluster(
      inClusterCredentials({ host: "127.0.0.1", port: 1, serviceAccountDir: api.serviceAccountDir }),
      2_000,
    );
    expect(report.healthy).toBe(false);
    expect(report.error).toMatch(/ECONNREFUSED/);
  });
});
