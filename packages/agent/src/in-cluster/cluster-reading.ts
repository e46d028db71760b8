import { join } from "node:path";
import { type ClusterNode, type ClusterReportFrame, clipText } from "@keelson/protocol";
import { expectOk, type KubeCredentials, kubeRequest } from "../phases/kube-api.ts";

/**
 * What an in-cluster agent reads from its cluster's API, with the pod's service-account token and
 * the cluster CA where Kubernetes mounts them (both read per call: the kubelet renews the
 * projected token in place): GET /version, /api/v1/nodes and /readyz, which the deployment
 * YAML's ClusterRole grants and nothing else. A refusal or an unreachable API is the report's
 * error, never a throw: the agent keeps reporting, and the control plane shows why.
 */

export type ClusterReport = Omit<ClusterReportFrame, "type">;

export interface InClusterApi {
  /** KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, as Kubernetes sets them in a pod. */
  host: string;
  port: number;
  /** The service-account dir: `token` and `ca.crt`. */
  serviceAccountDir: string;
}

/** The API's URL as client-go's InClusterConfig builds it (an IPv6 host in brackets). */
export function inClusterCredentials(api: InClusterApi): KubeCredentials {
  const host = api.host.includes(":") ? `[${api.host}]` : api.host;
  return {
    url: `https://${host}:${api.port}`,
    caFile: join(api.serviceAccountDir, "ca.crt"),
    tokenFile: join(api.serviceAccountDir, "token"),
  };
}

const ROLE_LABEL = "node-role.kubernetes.io/";

interface KubeNodeObject {
  metadata: { name: string; labels?: Record<string, string> };
  status?: {
    conditions?: { type: string; status: string }[];
    nodeInfo?: { kubeletVersion?: string };
    addresses?: { type: string; address: string }[];
  };
}

/** One listed Node as the report carries it: roles from its labels, its Ready condition, kubelet, InternalIP. */
export function clusterNodeOf(node: KubeNodeObject): ClusterNode {
  const roles = Object.keys(node.metadata.labels ?? {})
    .filter((label) => label.startsWith(ROLE_LABEL) && label.length > ROLE_LABEL.length)
    .map((label) => label.slice(ROLE_LABEL.length))
    .sort();
  const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status;
  return {
    name: node.metadata.name,
    roles,
    ready: ready === "True" || ready === "False" ? ready : "Unknown",
    kubeletVersion: node.status?.nodeInfo?.kubeletVersion ?? "",
    internalIp: node.status?.addresses?.find((a) => a.type === "InternalIP")?.address ?? null,
  };
}

/** Reads the cluster once; every failure lands in `error` (the first one, with what was being read). */
export async function readCluster(credentials: KubeCredentials, timeoutMs: number): Promise<ClusterReport> {
  const get = async (path: string) => {
    const answer = await kubeRequest(credentials, "GET", path, undefined, { timeoutMs });
    expectOk(answer, `GET ${path}`);
    return answer;
  };
  const errors: string[] = [];
  const attempt = async <T>(read: () => Promise<T>): Promise<T | null> => {
    try {
      return await read();
    } catch (err) {
      errors.push((err as Error).message);
      return null;
    }
  };
  const [version, nodes, ready] = await Promise.all([
    attempt(async () => ((await get("/version")).json as { gitVersion?: string }).gitVersion ?? null),
    attempt(async () =>
      (((await get("/api/v1/nodes")).json as { items?: KubeNodeObject[] }).items ?? []).map(clusterNodeOf),
    ),
    attempt(async () => (await get("/readyz")).status === 200),
  ]);
  return {
    kubernetesVersion: version,
    nodes,
    healthy: errors.length === 0 && ready === true,
    ...(errors.length > 0 ? { error: clipText(errors.join("; ")) } : {}),
    at: new Date().toISOString(),
  };
}
