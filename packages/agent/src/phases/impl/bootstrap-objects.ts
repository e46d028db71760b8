import { isIP } from "node:net";
import { isDeepStrictEqual } from "node:util";
import { CLUSTER_ADMINS_GROUP } from "@keelson/protocol";
import { createKubeObjects, KubeApiError, type KubeObjects } from "../kube-api.ts";
import type { PhaseContext } from "../types.ts";
import { clusterDnsIp } from "./render.ts";

/**
 * The objects a cluster needs from its first moment, applied through the API server by every
 * master once its API answers (wait-for-services) and applied again when they drift (its
 * status): any master may be the first, and applying is idempotent (create when missing,
 * replace only what differs, delete-and-create where the API makes a field immutable).
 *
 * - ClusterRoleBinding `keelson:cluster-admins` → `cluster-admin` for the group every Keelson
 *   kubeconfig carries (certificate O, and the bouncer's token-review answer).
 * - Service `kube-system/kube-dns` at the address the kubelets are given as `clusterDNS`, and
 *   this master's CoreDNS as one of its endpoints (EndpointSlice `kube-dns-<node>`).
 * - ClusterRole `system:coredns` and, per master, ClusterRoleBinding `keelson:coredns:<node>`
 *   to that master's kubelet identity, which its CoreDNS uses (the Corefile's `tls`). CoreDNS's
 *   kubernetes plugin lists and watches Services, EndpointSlices and Namespaces and answers
 *   SERVFAIL until all three lists succeed; the Node authorizer grants a kubelet Services only.
 *   The rules are those of CoreDNS's own deployment manifest (and kubeadm's `system:coredns`),
 *   less pods and Endpoints, which a Corefile with `pods insecure` on 1.11 does not read.
 *
 * The master applies them as `kube-apiserver-kubelet-client` (group system:masters), the one
 * credential on a master that the API lets past RBAC; kubeadm uses its super-admin kubeconfig
 * for the same step.
 */

interface Meta {
  name: string;
  namespace?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
}

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  [field: string]: unknown;
}

interface BootstrapObject {
  /** Where the object lives, and the collection it is created in. */
  path: string;
  collection: string;
  object: KubeObject;
  /** The fields Keelson owns: compared, and written over what is there. */
  owned: string[];
  /** Owned fields the API refuses to change: a difference means delete and create. */
  immutable: string[];
}

const RBAC = "/apis/rbac.authorization.k8s.io/v1";

export function bootstrapObjects(ctx: PhaseContext): BootstrapObject[] {
  const binding = CLUSTER_ADMINS_GROUP;
  const dnsLabels = { "k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS" };
  return [
    {
      path: `${RBAC}/clusterrolebindings/${encodeURIComponent(binding)}`,
      collection: `${RBAC}/clusterrolebindings`,
      object: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: binding, labels: { "app.kubernetes.io/managed-by": "keelson" } },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: CLUSTER_ADMINS_GROUP }],
      },
      owned: ["roleRef", "subjects"],
      immutable: ["roleRef"],
    },
    {
      path: "/api/v1/namespaces/kube-system/services/kube-dns",
      collection: "/api/v1/namespaces/kube-system/services",
      object: {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "kube-dns", namespace: "kube-system", labels: dnsLabels },
        // No selector: CoreDNS runs on the masters as a host service, not as pods, so each
        // master publishes its own address in an EndpointSlice of this Service (below).
        spec: { clusterIP: clusterDnsIp(ctx.config), ports: DNS_PORTS.map((p) => ({ ...p, targetPort: p.port })) },
      },
      owned: ["spec.clusterIP", "spec.ports"],
      immutable: ["spec.clusterIP"],
    },
    dnsEndpointSlice(ctx),
    {
      path: `${RBAC}/clusterroles/${encodeURIComponent(COREDNS_ROLE)}`,
      collection: `${RBAC}/clusterroles`,
      object: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: COREDNS_ROLE, labels: { "app.kubernetes.io/managed-by": "keelson" } },
        rules: [
          { apiGroups: [""], resources: ["services", "namespaces"], verbs: ["list", "watch"] },
          { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
        ],
      },
      owned: ["rules"],
      immutable: [],
    },
    corednsBinding(ctx),
  ];
}

const COREDNS_ROLE = "system:coredns";

/** This master's CoreDNS identity (its kubelet's, system:node:<name>) bound to system:coredns. */
function corednsBinding(ctx: PhaseContext): BootstrapObject {
  const name = `keelson:coredns:${ctx.config.nodeName.toLowerCase()}`;
  return {
    path: `${RBAC}/clusterrolebindings/${encodeURIComponent(name)}`,
    collection: `${RBAC}/clusterrolebindings`,
    object: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name, labels: { "app.kubernetes.io/managed-by": "keelson" } },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: COREDNS_ROLE },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: `system:node:${ctx.config.nodeName}` }],
    },
    owned: ["roleRef", "subjects"],
    immutable: ["roleRef"],
  };
}

const DNS_PORTS = [
  { name: "dns", port: 53, protocol: "UDP" },
  { name: "dns-tcp", port: 53, protocol: "TCP" },
  { name: "metrics", port: 9153, protocol: "TCP" },
];

const SLICES = "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices";

/** This master's CoreDNS as an endpoint of kube-dns (a custom EndpointSlice of a selectorless Service). */
function dnsEndpointSlice(ctx: PhaseContext): BootstrapObject {
  const { config } = ctx;
  const name = `kube-dns-${config.nodeName.toLowerCase()}`;
  return {
    path: `${SLICES}/${encodeURIComponent(name)}`,
    collection: SLICES,
    object: {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name,
        namespace: "kube-system",
        labels: {
          "kubernetes.io/service-name": "kube-dns",
          "endpointslice.kubernetes.io/managed-by": "keelson.io",
        },
      },
      addressType: isIP(config.primaryIp) === 6 ? "IPv6" : "IPv4",
      endpoints: [{ addresses: [config.primaryIp], conditions: { ready: true }, nodeName: config.nodeName }],
      ports: DNS_PORTS,
    },
    owned: ["addressType", "endpoints", "ports"],
    immutable: ["addressType"],
  };
}

/** A master leaving the cluster takes its CoreDNS out of kube-dns, and its binding with it. */
export async function removeOwnDnsEndpoint(ctx: PhaseContext): Promise<void> {
  const api = objectsClient(ctx);
  await api.delete(dnsEndpointSlice(ctx).path, ctx.signal);
  await api.delete(corednsBinding(ctx).path, ctx.signal);
}

function field(object: unknown, path: string): unknown {
  return path.split(".").reduce<unknown>((v, key) => (v as Record<string, unknown> | undefined)?.[key], object);
}

function withField(object: KubeObject, path: string, value: unknown): KubeObject {
  const copy = structuredClone(object);
  const keys = path.split(".");
  let at = copy as Record<string, unknown>;
  for (const key of keys.slice(0, -1)) {
    at[key] ??= {};
    at = at[key] as Record<string, unknown>;
  }
  at[keys.at(-1) as string] = structuredClone(value);
  return copy;
}

/** The owned fields of `want` that `have` does not hold. */
function differing(item: BootstrapObject, have: KubeObject): string[] {
  return item.owned.filter((f) => !isDeepStrictEqual(field(have, f), field(item.object, f)));
}

function objectsClient(ctx: PhaseContext): KubeObjects {
  const { paths, config } = ctx;
  return createKubeObjects({
    url: config.apiServerUrl,
    caFile: paths.caCert,
    certFile: paths.cert("apiserver-kubelet-client"),
    keyFile: paths.key("apiserver-kubelet-client"),
  });
}

const nameOf = (item: BootstrapObject) =>
  `${item.object.kind} ${item.object.metadata.namespace ? `${item.object.metadata.namespace}/` : ""}${item.object.metadata.name}`;

/** True when this call created it, false when another master just had (409 AlreadyExists). */
async function createdOrRaced(api: KubeObjects, item: BootstrapObject, signal: AbortSignal): Promise<boolean> {
  try {
    await api.create(item.collection, item.object, signal);
    return true;
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 409) return false;
    throw err;
  }
}

/** Creates or corrects each object; returns what it changed ("created ClusterRoleBinding x"). */
export async function applyBootstrapObjects(ctx: PhaseContext): Promise<string[]> {
  const api = objectsClient(ctx);
  const changes: string[] = [];
  for (const item of bootstrapObjects(ctx)) {
    const have = await api.get<KubeObject>(item.path, ctx.signal);
    if (!have) {
      // Another master may create it between the read and here: then it is there, and the
      // status check compares it.
      if (await createdOrRaced(api, item, ctx.signal)) changes.push(`created ${nameOf(item)}`);
      continue;
    }
    const diff = differing(item, have);
    if (diff.length === 0) continue;
    if (diff.some((f) => item.immutable.includes(f))) {
      await api.delete(item.path, ctx.signal);
      await api.create(item.collection, item.object, ctx.signal);
      changes.push(`recreated ${nameOf(item)} (${diff.join(", ")})`);
      continue;
    }
    const next = diff.reduce((o, f) => withField(o, f, field(item.object, f)), have);
    await api.replace(item.path, next, ctx.signal);
    changes.push(`corrected ${nameOf(item)} (${diff.join(", ")})`);
  }
  return changes;
}

/** What is missing or differs, or undefined when every object is as applied. */
export async function bootstrapDrift(ctx: PhaseContext): Promise<string | undefined> {
  const api = objectsClient(ctx);
  const problems: string[] = [];
  for (const item of bootstrapObjects(ctx)) {
    const have = await api.get<KubeObject>(item.path, ctx.signal);
    if (!have) problems.push(`${nameOf(item)} is missing`);
    else {
      const diff = differing(item, have);
      if (diff.length > 0) problems.push(`${nameOf(item)} differs in ${diff.join(", ")}`);
    }
  }
  return problems.length > 0 ? problems.join("; ") : undefined;
}
