import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentManifestObjects } from "../../packages/control-plane/src/domain/external-clusters/agent-manifest.ts";
import { freePort } from "../e2e/support/processes.ts";
import { makeCa } from "./kube-pki.ts";
import { kubeCall, processes, startApiServer, writeSecret } from "./standin-cluster.ts";

/**
 * An external cluster for an in-cluster agent: the strict stand-in kube-apiserver (authn, RBAC)
 * on loopback with two Nodes, the agent's Namespace, ServiceAccount, least RBAC and Secrets exactly
 * as the deployment YAML has them (agentManifestObjects), and a service-account dir as Kubernetes
 * mounts it in the pod: a token from the TokenRequest API, the cluster CA, the namespace.
 * `kube` calls the API as system:masters (an operator's kubectl). stop() ends the apiserver and
 * removes the files.
 */

const CLUSTER_NODES = [
  {
    name: "ip-10-0-1-10",
    labels: { "node-role.kubernetes.io/control-plane": "", "kubernetes.io/os": "linux" },
    ready: "True",
    ip: "10.0.1.10",
  },
  { name: "ip-10-0-1-11", labels: { "node-role.kubernetes.io/worker": "" }, ready: "False", ip: "10.0.1.11" },
] as const;

/** CLUSTER_NODES as the agent reports them (protocol's ClusterNode). */
export const REPORTED_NODES = [
  { name: "ip-10-0-1-10", roles: ["control-plane"], ready: "True", kubeletVersion: "v1.31.4", internalIp: "10.0.1.10" },
  { name: "ip-10-0-1-11", roles: ["worker"], ready: "False", kubeletVersion: "v1.31.4", internalIp: "10.0.1.11" },
];

export async function startInClusterApi() {
  const dir = mkdtempSync(join(tmpdir(), "keelson-incluster-"));
  const procs = processes();
  try {
    const ca = makeCa(join(dir, "ca"));
    const host = "127.0.0.1";
    const port = await freePort(host);
    const { server, masters } = await startApiServer(procs.start, dir, ca, host, port);
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await kubeCall(ca.cert, masters, method, `${server}${path}`, body);
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
      return JSON.parse(r.text) as Record<string, unknown>;
    };
    const objects = agentManifestObjects({
      clusterName: "payments",
      clusterId: "c",
      controlPlane: "http://127.0.0.1:1",
      caHash: null,
      caPem: null,
      joinToken: "unused",
      agentPackage: { version: "0.0.0", sha256: "0".repeat(64), sizeBytes: 1, storedAt: "" },
    });
    const collections: Record<string, string> = {
      Namespace: "/api/v1/namespaces",
      ServiceAccount: "/api/v1/namespaces/keelson-agent/serviceaccounts",
      ClusterRole: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
      ClusterRoleBinding: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
      Role: "/apis/rbac.authorization.k8s.io/v1/namespaces/keelson-agent/roles",
      RoleBinding: "/apis/rbac.authorization.k8s.io/v1/namespaces/keelson-agent/rolebindings",
      Secret: "/api/v1/namespaces/keelson-agent/secrets",
    };
    for (const object of objects) {
      const collection = collections[object.kind as string];
      if (collection) await call("POST", collection, object);
    }
    for (const node of CLUSTER_NODES) {
      await call("POST", "/api/v1/nodes", {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: node.name, labels: node.labels },
        status: {
          conditions: [{ type: "Ready", status: node.ready }],
          nodeInfo: { kubeletVersion: "v1.31.4" },
          addresses: [
            { type: "InternalIP", address: node.ip },
            { type: "Hostname", address: node.name },
          ],
        },
      });
    }
    const request = await call("POST", "/api/v1/namespaces/keelson-agent/serviceaccounts/keelson-agent/token", {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: {},
    });
    const serviceAccountDir = join(dir, "serviceaccount");
    mkdirSync(serviceAccountDir);
    const token = (request.status as { token: string }).token;
    writeSecret(join(serviceAccountDir, "token"), token);
    writeSecret(join(serviceAccountDir, "ca.crt"), ca.cert);
    writeSecret(join(serviceAccountDir, "namespace"), "keelson-agent");
    return {
      host,
      port,
      server,
      serviceAccountDir,
      kube: call,
      /** Replaces the mounted token (as a revoked or foreign one would be). */
      forgeToken: () => writeSecret(join(serviceAccountDir, "token"), "kct_forged"),
      /** Mounts the token the TokenRequest API issued again. */
      restoreToken: () => writeSecret(join(serviceAccountDir, "token"), token),
      stop: () => {
        procs.stopAll();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    procs.stopAll();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
