import { IN_CLUSTER_IDENTITY_SECRET, IN_CLUSTER_REGISTRATION_ANNOTATION } from "@keelson/protocol";
// Types only (erased at run time; the package is a dev dependency): an unknown or misspelt field
// in the objects below fails the typecheck, and the tests validate the output against the same
// library's compiled API schemas.
import type { IDeployment } from "kubernetes-models/apps/v1";
import type {
  IClusterRole,
  IClusterRoleBinding,
  IRole,
  IRoleBinding,
} from "kubernetes-models/rbac.authorization.k8s.io/v1";
import type { IConfigMap, IContainer, INamespace, ISecret, IServiceAccount } from "kubernetes-models/v1";
import { stringify } from "yaml";
import type { StoredPackage } from "../packages/shelf.ts";

/**
 * The deployment YAML of an external cluster's agent (spec §4.2): what `kubectl apply -f` needs
 * to run the Keelson agent inside a private cluster, which Keelson cannot reach but whose agent
 * can reach Keelson. Objects, in apply order:
 * - Namespace `keelson-agent`;
 * - ServiceAccount `keelson-agent` (its token and the cluster CA are mounted at the standard
 *   in-cluster paths, which the agent reads);
 * - ClusterRole + ClusterRoleBinding with the least the agent reads: nodes (get, list) and the
 *   non-resource URLs `/version`, `/readyz`, `/livez`;
 * - Role + RoleBinding `keelson-agent`: get and update on the one Secret
 *   `keelson-agent-identity` (its resourceName), the agent's only write;
 * - Secret `keelson-agent-join`: the join token minted for this cluster (spent at the first
 *   registration); Secret `keelson-agent-identity`, created empty: the agent keeps the identity
 *   it registered with there, so that a pod rescheduled elsewhere (its state dir an emptyDir)
 *   links again as the same agent (created here, the agent needs no `create`); annotated with
 *   the registration's id, which the agent keeps beside the identity: a registration's YAML
 *   applied over the Secret of an earlier (deregistered) one leaves its data, and the annotation
 *   tells the agent to register with the new join token instead of restoring it; ConfigMap
 *   `keelson-agent`: the control plane's URL, CA pin and CA certificate, and the agent
 *   package's version and sha256 (public values);
 * - Deployment `keelson-agent`, one replica (`Recreate`: one link per cluster), its pod template
 *   annotated with the registration's id too (a new registration's YAML rolls out a new pod,
 *   whose empty state dir holds no deleted identity), non-root with a read-only root file system:
 *   an init container fetches the agent package from the control plane (over TLS trusting only
 *   its CA, checked against the sha256) and the bundled agent (`agent.mjs`) runs in in-cluster
 *   mode.
 * The image is the official Node.js image the agent package needs (Node.js 22, Debian slim),
 * named without a registry host, so the cluster's own mirror configuration applies.
 */
export const AGENT_NAMESPACE = "keelson-agent";
export const AGENT_NAME = "keelson-agent";
export const AGENT_IMAGE = "node:22-bookworm-slim";

export interface AgentManifestInput {
  /** The external cluster's provider id (the EKS name): the agent's host name. */
  clusterName: string;
  /** Keelson's id of the registration, as a label. */
  clusterId: string;
  controlPlane: string;
  caHash: string | null;
  caPem: string | null;
  joinToken: string;
  agentPackage: StoredPackage;
}

const LABELS = { "app.kubernetes.io/name": AGENT_NAME, "app.kubernetes.io/managed-by": "keelson" };
const STATE_DIR = "/var/lib/keelson-agent";
const AGENT_DIR = "/opt/keelson/agent";
const CONFIG_DIR = "/etc/keelson";

/**
 * Run by the init container with `node -e SCRIPT URL SHA256`: downloads the package (trusting
 * only the control plane's CA when it speaks TLS), checks its sha256 and unpacks it into the
 * agent volume.
 */
const FETCH_SCRIPT = `
const { createHash } = require("node:crypto");
const { existsSync, readFileSync, writeFileSync } = require("node:fs");
const { execFileSync } = require("node:child_process");
const [url, sha256] = process.argv.slice(1);
const ca = existsSync("${CONFIG_DIR}/ca.pem") ? readFileSync("${CONFIG_DIR}/ca.pem") : undefined;
const client = require(url.startsWith("https:") ? "node:https" : "node:http");
client.get(url, ca ? { ca } : {}, (res) => {
  if (res.statusCode !== 200) { console.error("GET " + url + ": " + res.statusCode); process.exit(1); }
  const chunks = [];
  res.on("data", (c) => chunks.push(c));
  res.on("end", () => {
    const body = Buffer.concat(chunks);
    const got = createHash("sha256").update(body).digest("hex");
    if (got !== sha256) { console.error("agent package sha256 " + got + ", expected " + sha256); process.exit(1); }
    writeFileSync("/tmp/package.tar.gz", body);
    execFileSync("tar", ["-xzf", "/tmp/package.tar.gz", "--no-same-owner", "-C", "${AGENT_DIR}"]);
  });
}).on("error", (e) => { console.error(e.message); process.exit(1); });
`.trim();

function metadata(name: string, namespaced = true) {
  return { name, ...(namespaced ? { namespace: AGENT_NAMESPACE } : {}), labels: { ...LABELS } };
}

export type AgentManifestObject =
  | INamespace
  | IServiceAccount
  | IClusterRole
  | IClusterRoleBinding
  | IRole
  | IRoleBinding
  | ISecret
  | IConfigMap
  | IDeployment;

/** The objects of the manifest, in apply order. */
export function agentManifestObjects(input: AgentManifestInput): AgentManifestObject[] {
  const fromConfig = (name: string) => ({
    name,
    valueFrom: { configMapKeyRef: { name: AGENT_NAME, key: name } },
  });
  const containerSecurity: IContainer["securityContext"] = {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  };
  const packageUrl = `${input.controlPlane.replace(/\/+$/, "")}/v1/agentPackages/${input.agentPackage.version}/package.tar.gz`;
  const config: Record<string, string> = {
    KEELSON_CONTROL_PLANE: input.controlPlane,
    KEELSON_AGENT_VERSION: input.agentPackage.version,
    KEELSON_AGENT_SHA256: input.agentPackage.sha256,
    ...(input.caHash ? { KEELSON_CA_HASH: input.caHash } : {}),
    ...(input.caPem ? { "ca.pem": input.caPem } : {}),
  };
  const registration = { [IN_CLUSTER_REGISTRATION_ANNOTATION]: input.clusterId };
  return [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: AGENT_NAMESPACE, labels: { ...LABELS } },
    } satisfies INamespace,
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: metadata(AGENT_NAME),
      automountServiceAccountToken: true,
    } satisfies IServiceAccount,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: metadata(AGENT_NAME, false),
      rules: [
        { apiGroups: [""], resources: ["nodes"], verbs: ["get", "list"] },
        { nonResourceURLs: ["/version", "/readyz", "/livez"], verbs: ["get"] },
      ],
    } satisfies IClusterRole,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: metadata(AGENT_NAME, false),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: AGENT_NAME },
      subjects: [{ kind: "ServiceAccount", name: AGENT_NAME, namespace: AGENT_NAMESPACE }],
    } satisfies IClusterRoleBinding,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: metadata(AGENT_NAME),
      rules: [
        {
          apiGroups: [""],
          resources: ["secrets"],
          resourceNames: [IN_CLUSTER_IDENTITY_SECRET],
          verbs: ["get", "update"],
        },
      ],
    } satisfies IRole,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: metadata(AGENT_NAME),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: AGENT_NAME },
      subjects: [{ kind: "ServiceAccount", name: AGENT_NAME, namespace: AGENT_NAMESPACE }],
    } satisfies IRoleBinding,
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: metadata(`${AGENT_NAME}-join`),
      type: "Opaque",
      stringData: { KEELSON_JOIN_TOKEN: input.joinToken },
    } satisfies ISecret,
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { ...metadata(IN_CLUSTER_IDENTITY_SECRET), annotations: registration },
      type: "Opaque",
    } satisfies ISecret,
    { apiVersion: "v1", kind: "ConfigMap", metadata: metadata(AGENT_NAME), data: config } satisfies IConfigMap,
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { ...metadata(AGENT_NAME), annotations: registration },
      spec: {
        replicas: 1,
        strategy: { type: "Recreate" },
        selector: { matchLabels: { "app.kubernetes.io/name": AGENT_NAME } },
        template: {
          metadata: { labels: { ...LABELS }, annotations: registration },
          spec: {
            serviceAccountName: AGENT_NAME,
            automountServiceAccountToken: true,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 1000,
              runAsGroup: 1000,
              fsGroup: 1000,
              seccompProfile: { type: "RuntimeDefault" },
            },
            initContainers: [
              {
                name: "fetch-agent",
                image: AGENT_IMAGE,
                command: ["node", "-e", FETCH_SCRIPT, packageUrl, input.agentPackage.sha256],
                securityContext: containerSecurity,
                volumeMounts: [
                  { name: "agent", mountPath: AGENT_DIR },
                  { name: "config", mountPath: CONFIG_DIR, readOnly: true },
                  { name: "tmp", mountPath: "/tmp" },
                ],
              },
            ],
            containers: [
              {
                name: "agent",
                image: AGENT_IMAGE,
                // The bundled agent itself, not the package's launcher: Kubernetes restarts the pod,
                // and a new version comes with a new manifest, not a self-upgrade.
                command: ["node", `${AGENT_DIR}/agent.mjs`],
                env: [
                  fromConfig("KEELSON_CONTROL_PLANE"),
                  ...(input.caHash ? [fromConfig("KEELSON_CA_HASH")] : []),
                  {
                    name: "KEELSON_JOIN_TOKEN",
                    valueFrom: { secretKeyRef: { name: `${AGENT_NAME}-join`, key: "KEELSON_JOIN_TOKEN" } },
                  },
                  { name: "KEELSON_AGENT_MODE", value: "in-cluster" },
                  { name: "KEELSON_HOSTNAME", value: input.clusterName },
                  { name: "KEELSON_STATE_DIR", value: STATE_DIR },
                ],
                resources: {
                  requests: { cpu: "50m", memory: "96Mi" },
                  limits: { memory: "256Mi" },
                },
                securityContext: containerSecurity,
                volumeMounts: [
                  { name: "agent", mountPath: AGENT_DIR, readOnly: true },
                  { name: "state", mountPath: STATE_DIR },
                  { name: "tmp", mountPath: "/tmp" },
                ],
              },
            ],
            volumes: [
              { name: "agent", emptyDir: {} },
              { name: "state", emptyDir: {} },
              { name: "tmp", emptyDir: {} },
              { name: "config", configMap: { name: AGENT_NAME } },
            ],
          },
        },
      },
    } satisfies IDeployment,
  ];
}

/** The manifest as one multi-document YAML stream. */
export function agentManifest(input: AgentManifestInput): string {
  return agentManifestObjects(input)
    .map((object) => stringify(object, { lineWidth: 0 }))
    .join("---\n");
}
