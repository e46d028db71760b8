import { readFileSync } from "node:fs";
import https from "node:https";
import { readBody } from "../read-body.ts";

/**
 * The few Kubernetes API calls the phases make (node labels, taints, cordon, drain), over
 * https with the cluster CA and a client certificate: the node's kubelet certificate for what a
 * kubelet may do to its own Node, a master's control-plane certificate for what only the masters
 * do (node-api.ts says which is which). Credentials are read per call because they appear (and
 * may be renewed) while the phases run.
 */

export interface KubeNode {
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { unschedulable?: boolean; taints?: Taint[] };
  status?: unknown;
}

export interface Taint {
  key: string;
  value?: string;
  effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
}

export interface PodRef {
  namespace: string;
  name: string;
  /** Owner kind: DaemonSet pods are left alone by a drain, as kubectl does. */
  ownerKind?: string;
}

export interface KubeApi {
  readonly url: string;
  ready(signal?: AbortSignal): Promise<void>;
  getNode(name: string, signal?: AbortSignal): Promise<KubeNode | undefined>;
  /** Nodes matching an equality-based label selector (`a=b,c=d`). */
  listNodes(labelSelector: string, signal?: AbortSignal): Promise<KubeNode[]>;
  /** JSON merge patch (lists are replaced whole). */
  patchNode(name: string, patch: unknown, signal?: AbortSignal): Promise<KubeNode>;
  /** Deletes the Node object; one already gone counts as deleted. */
  deleteNode(name: string, signal?: AbortSignal): Promise<void>;
  listPodsOnNode(nodeName: string, signal?: AbortSignal): Promise<PodRef[]>;
  /** Evicts a pod (policy/v1 Eviction); a pod already gone counts as evicted. */
  evictPod(pod: PodRef, signal?: AbortSignal): Promise<void>;
}

/**
 * The API's URL and CA, and who calls: a client certificate (the phases), or a bearer token file
 * (the in-cluster agent's service-account token, which the kubelet renews in place).
 */
export type KubeCredentials = { url: string; caFile: string } & (
  | { certFile: string; keyFile: string }
  | { tokenFile: string }
);

export class KubeApiError extends Error {
  override name = "KubeApiError";
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

export function createKubeApi(credentials: KubeCredentials, timeoutMs = 5000): KubeApi {
  const request = (method: string, path: string, body?: unknown, signal?: AbortSignal, contentType?: string) =>
    kubeRequest(credentials, method, path, body, { timeoutMs, signal, contentType });
  return {
    url: credentials.url,
    async ready(signal) {
      const answer = await request("GET", "/readyz", undefined, signal);
      if (answer.status !== 200)
        throw new KubeApiError(
          `${credentials.url}/readyz: ${answer.status} ${answer.text.slice(0, 300)}`,
          answer.status,
        );
    },
    async getNode(name, signal) {
      const answer = await request("GET", `/api/v1/nodes/${encodeURIComponent(name)}`, undefined, signal);
      if (answer.status === 404) return undefined;
      expectOk(answer, `GET node ${name}`);
      return answer.json as KubeNode;
    },
    async listNodes(labelSelector, signal) {
      const path = `/api/v1/nodes?labelSelector=${encodeURIComponent(labelSelector)}`;
      const answer = await request("GET", path, undefined, signal);
      expectOk(answer, `list nodes ${labelSelector}`);
      return ((answer.json as { items?: KubeNode[] })?.items ?? []) as KubeNode[];
    },
    async patchNode(name, patch, signal) {
      const answer = await request(
        "PATCH",
        `/api/v1/nodes/${encodeURIComponent(name)}`,
        patch,
        signal,
        "application/merge-patch+json",
      );
      expectOk(answer, `PATCH node ${name}`);
      return answer.json as KubeNode;
    },
    async deleteNode(name, signal) {
      const answer = await request("DELETE", `/api/v1/nodes/${encodeURIComponent(name)}`, undefined, signal);
      if (answer.status === 404) return;
      expectOk(answer, `DELETE node ${name}`);
    },
    async listPodsOnNode(nodeName, signal) {
      const selector = encodeURIComponent(`spec.nodeName=${nodeName}`);
      const answer = await request("GET", `/api/v1/pods?fieldSelector=${selector}`, undefined, signal);
      expectOk(answer, `list pods on ${nodeName}`);
      const items = ((answer.json as { items?: unknown[] })?.items ?? []) as {
        metadata: { namespace: string; name: string; ownerReferences?: { kind: string }[] };
      }[];
      return items.map((p) => ({
        namespace: p.metadata.namespace,
        name: p.metadata.name,
        ownerKind: p.metadata.ownerReferences?.[0]?.kind,
      }));
    },
    async evictPod(pod, signal) {
      const path = `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}/eviction`;
      const body = {
        apiVersion: "policy/v1",
        kind: "Eviction",
        metadata: { name: pod.name, namespace: pod.namespace },
      };
      const answer = await request("POST", path, body, signal);
      if (answer.status === 404) return;
      expectOk(answer, `evict pod ${pod.namespace}/${pod.name}`);
    },
  };
}

/**
 * Whole objects by path, for what the phases keep in the cluster (bootstrap-objects.ts): read
 * (undefined when absent), create in a collection, replace, delete. Failures are KubeApiError.
 */
export interface KubeObjects {
  get<T>(path: string, signal?: AbortSignal): Promise<T | undefined>;
  create<T>(collection: string, object: T, signal?: AbortSignal): Promise<T>;
  replace<T>(path: string, object: T, signal?: AbortSignal): Promise<T>;
  delete(path: string, signal?: AbortSignal): Promise<void>;
}

export function createKubeObjects(credentials: KubeCredentials, timeoutMs = 5000): KubeObjects {
  const request = (method: string, path: string, body?: unknown, signal?: AbortSignal) =>
    kubeRequest(credentials, method, path, body, { timeoutMs, signal });
  return {
    async get<T>(path: string, signal?: AbortSignal) {
      const answer = await request("GET", path, undefined, signal);
      if (answer.status === 404) return undefined;
      expectOk(answer, `GET ${path}`);
      return answer.json as T;
    },
    async create<T>(collection: string, object: T, signal?: AbortSignal) {
      const answer = await request("POST", collection, object, signal);
      expectOk(answer, `POST ${collection}`);
      return answer.json as T;
    },
    async replace<T>(path: string, object: T, signal?: AbortSignal) {
      const answer = await request("PUT", path, object, signal);
      expectOk(answer, `PUT ${path}`);
      return answer.json as T;
    },
    async delete(path, signal) {
      const answer = await request("DELETE", path, undefined, signal);
      if (answer.status !== 404) expectOk(answer, `DELETE ${path}`);
    },
  };
}

export function expectOk(answer: { status: number; text: string }, what: string): void {
  if (answer.status >= 200 && answer.status < 300) return;
  let message = answer.text.slice(0, 300);
  try {
    message = (JSON.parse(answer.text) as { message?: string }).message ?? message;
  } catch {
    // Not JSON: keep the text.
  }
  throw new KubeApiError(`${what}: the API answered ${answer.status}: ${message}`, answer.status);
}

export function kubeRequest(
  credentials: KubeCredentials,
  method: string,
  path: string,
  body: unknown,
  options: { timeoutMs: number; signal?: AbortSignal; contentType?: string },
): Promise<{ status: number; text: string; json: unknown }> {
  return new Promise((resolve, reject) => {
    let tls: { ca: Buffer; cert?: Buffer; key?: Buffer };
    let bearer: Record<string, string> = {};
    try {
      if ("tokenFile" in credentials) {
        tls = { ca: readFileSync(credentials.caFile) };
        bearer = { authorization: `Bearer ${readFileSync(credentials.tokenFile, "utf8").trim()}` };
      } else {
        tls = {
          ca: readFileSync(credentials.caFile),
          cert: readFileSync(credentials.certFile),
          key: readFileSync(credentials.keyFile),
        };
      }
    } catch (err) {
      reject(new KubeApiError(`no credentials for the Kubernetes API yet: ${(err as Error).message}`, 0));
      return;
    }
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const url = new URL(path, credentials.url);
    const req = https.request(
      url,
      {
        method,
        ...tls,
        timeout: options.timeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
        headers: {
          accept: "application/json",
          ...bearer,
          ...(payload
            ? {
                "content-type": options.contentType ?? "application/json",
                "content-length": Buffer.byteLength(payload),
              }
            : {}),
        },
      },
      (res) => {
        readBody(res).then((text) => {
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json });
        }, reject);
      },
    );
    req.on("timeout", () =>
      req.destroy(new KubeApiError(`${url.origin} did not answer within ${options.timeoutMs} ms`, 0)),
    );
    req.on("error", (err) =>
      reject(err instanceof KubeApiError ? err : new KubeApiError(`${method} ${url.href}: ${err.message}`, 0)),
    );
    if (payload) req.write(payload);
    req.end();
  });
}
