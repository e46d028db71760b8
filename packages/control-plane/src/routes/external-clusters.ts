import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type TSchema, Type } from "typebox";
import { type AgentView, agentViews } from "../domain/external-clusters/agent-reports.ts";
import { agentDeploymentYaml, deregisterExternalCluster } from "../domain/external-clusters/cluster-agent.ts";
import { discoverExternalClusters } from "../domain/external-clusters/discover.ts";
import { listExternalClusters, registerExternalCluster } from "../domain/external-clusters/external-clusters.ts";
import { getProject } from "../domain/projects/projects.ts";
import { baseUrlOf } from "../http/base-url.ts";
import { sendNoBody } from "../http/no-body.ts";
import {
  ErrorBody,
  errorResponses as errors,
  MEMBER,
  NoBody,
  PROJECT_ADMIN,
  ProjectIdParams,
  READER,
  Timestamp,
  V1ProjectParams,
} from "./common-schemas.ts";

const TAGS = ["external clusters"];

const ClusterParams = Type.Object({
  projectId: Type.String({ description: "Project UUID" }),
  clusterID: Type.String({ description: "Keelson's id of the registration, or the cluster's id at its provider" }),
});

const ProviderDetails = Type.Record(Type.String(), Type.Unknown(), {
  description: "Cloud-specific parameters; for eks, `region` (the AWS region)",
});

const RegistrationBody = Type.Object(
  {
    id: Type.String({ description: "The cluster's identifier at its provider (for eks, the EKS cluster name)" }),
    provider: Type.String({ description: "eks (aks and gke are refused until Keelson calls their clouds)" }),
    cloudProviderID: Type.String({ description: "UUID of the cloud provider account the cluster runs in" }),
    providerDetails: ProviderDetails,
  },
  { additionalProperties: false },
);

const Discovered = Type.Array(
  Type.Object({
    id: Type.String(),
    provider: Type.String(),
    cloudProviderID: Type.String(),
    providerDetails: ProviderDetails,
  }),
);

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

const ClusterNode = Type.Object({
  name: Type.String(),
  roles: Type.Array(Type.String(), { description: "From the node-role.kubernetes.io/<role> labels" }),
  ready: Type.String({ description: "The status of the node's Ready condition: True, False or Unknown" }),
  kubeletVersion: Type.String(),
  internalIp: Nullable(Type.String()),
});

const AgentReport = Type.Object(
  {
    registered: Type.Boolean({ description: "An agent registered with the cluster's deployment YAML" }),
    connected: Type.Boolean({ description: "That agent is linked to the control plane now" }),
    stale: Type.Boolean({ description: "The report below is the last one of an agent that is not linked now" }),
    reportedAt: Nullable(Timestamp),
    healthy: Nullable(Type.Boolean({ description: "The cluster's /readyz answered 200 and every read succeeded" })),
    error: Nullable(Type.String({ description: "Why a read failed, as the cluster's API answered it" })),
    nodeCount: Nullable(Type.Integer()),
    readyNodes: Nullable(Type.Integer()),
    nodes: Nullable(Type.Array(ClusterNode)),
  },
  { description: "What the cluster's in-cluster agent last read from the cluster's API (null fields: not read)" },
);

const Registered = Type.Array(
  Type.Object({
    uuid: Type.String({ description: "Keelson's id of the registration" }),
    id: Type.String(),
    provider: Type.String(),
    cloudProviderID: Type.Union([Type.String(), Type.Null()]),
    providerDetails: ProviderDetails,
    kubernetesVersion: Nullable(Type.String({ description: "As the cluster's agent last read it (GET /version)" })),
    agent: AgentReport,
    createdAt: Timestamp,
  }),
);

function presentAgent(view: AgentView | undefined) {
  const report = view?.report ?? null;
  const nodes = report?.nodes ?? null;
  return {
    registered: view?.registered ?? false,
    connected: view?.connected ?? false,
    stale: view?.stale ?? false,
    reportedAt: report?.at ?? null,
    healthy: report?.healthy ?? null,
    error: report?.error ?? null,
    nodeCount: nodes ? nodes.length : null,
    readyNodes: nodes ? nodes.filter((n) => n.ready === "True").length : null,
    nodes,
  };
}

/** RFC 9110's Warning field is obsolete, but it is the header clients show; 199 = miscellaneous. */
const warningHeader = (text: string) => `199 keelson "${text.replace(/["\\\r\n]/g, " ")}"`;

/**
 * External clusters (spec §4.2): thin routes over domain/external-clusters. See
 * routes/catalogue.ts for why discover asks for a token.
 */
export const externalClusterRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;

  app.get(
    "/v4/:projectId/externalClusters/discover",
    {
      config: READER,
      schema: {
        tags: TAGS,
        summary: "External clusters available to be registered",
        description:
          "The EKS clusters of the project's AWS accounts, every region each account has, that are not registered " +
          "yet. A region or account the cloud does not answer for (in KEELSON_CLOUD_CALL_TIMEOUT_MS) is left out, " +
          "logged, and named in a `Warning` header (code 199) of the answer.",
        params: ProjectIdParams,
        response: { 200: Discovered, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      await getProject(keelson.db, request.params.projectId);
      const { clusters, warnings } = await discoverExternalClusters(keelson, request.params.projectId);
      if (warnings.length > 0) {
        request.log.warn({ warnings }, "external cluster discovery left out what the cloud did not answer for");
        reply.header("warning", warnings.map(warningHeader));
      }
      return clusters;
    },
  );

  app.post(
    "/v4/:projectId/externalClusters/register",
    {
      config: MEMBER,
      schema: {
        tags: TAGS,
        summary: "Register an external cluster",
        description:
          "400 for a malformed body, an account of another cloud, a region the account does not have, or an " +
          "aks/gke cluster; 404 when the account or the cluster (EKS DescribeCluster) is unknown; 409 when it is " +
          "registered already; 503 when the cloud cannot be asked.",
        params: ProjectIdParams,
        body: RegistrationBody,
        response: { 200: NoBody, ...errors(400, 403, 404, 409, 503) },
      },
    },
    async (request, reply) => {
      await getProject(keelson.db, request.params.projectId);
      await registerExternalCluster(keelson, request.params.projectId, request.body);
      return sendNoBody(reply);
    },
  );

  app.post(
    "/v4/:projectId/externalClusters/:clusterID/deregister",
    {
      config: MEMBER,
      schema: {
        tags: TAGS,
        summary: "Deregister an external cluster",
        description:
          "Removes the registration and revokes its agent: the join tokens of its deployment YAML are deleted, " +
          "the host its agent registered as is removed (its credential with it) and its link closed (4401). " +
          "Nothing changes in the cluster itself. 404 for an unknown cluster.",
        params: ClusterParams,
        response: { 200: NoBody, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      await deregisterExternalCluster(keelson, request.params.projectId, request.params.clusterID);
      return sendNoBody(reply);
    },
  );

  app.get(
    "/v4/:projectId/externalClusters/:clusterID/deploymentYAML",
    {
      // It carries a new join token: the role that mints join tokens, recorded as issued.
      config: { ...PROJECT_ADMIN, issues: "join token" },
      schema: {
        tags: TAGS,
        summary: "Deployment YAML of the cluster agent for a private external cluster",
        description:
          "A multi-document manifest for `kubectl apply -f`: Namespace, ServiceAccount, a ClusterRole reading nodes " +
          "and /version, /readyz, /livez (nothing else) with its binding, a Role and binding letting the agent get " +
          "and update only the Secret keelson-agent-identity (created empty and annotated with the registration's id: " +
          "the agent keeps its identity there, so a pod rescheduled elsewhere links again, and a new registration's " +
          "YAML applied over it makes the agent register anew), a Secret with a join token minted for this " +
          `cluster (valid 24 hours, spent at the agent's registration; a new manifest replaces an unspent one), a ` +
          "ConfigMap with this control plane's URL and CA, and a Deployment running the Keelson agent in in-cluster " +
          "mode. 404 when the cluster is not registered or no agent package is stored to deploy.",
        params: ClusterParams,
        response: {
          200: {
            description: "YAML",
            content: { "application/octet-stream": { schema: Type.String({ format: "binary" }) } },
          },
          403: ErrorBody,
          404: ErrorBody,
        },
      },
    },
    async (request, reply) => {
      const { projectId, clusterID } = request.params;
      const yaml = await agentDeploymentYaml(
        keelson,
        projectId,
        clusterID,
        baseUrlOf(keelson.settings.publicUrl, request),
      );
      return reply
        .header("content-type", "application/octet-stream")
        .header("content-disposition", 'attachment; filename="keelson-agent.yaml"')
        .header("cache-control", "no-store")
        .send(yaml);
    },
  );

  app.get(
    "/v1/projects/:projectId/externalClusters",
    {
      config: READER,
      schema: {
        tags: TAGS,
        summary: "Registered external clusters (extension)",
        params: V1ProjectParams,
        response: { 200: Registered, ...errors(403, 404) },
      },
    },
    async (request) => {
      await getProject(keelson.db, request.params.projectId);
      const rows = await listExternalClusters(keelson.db, request.params.projectId);
      const agents = await agentViews(keelson.db, rows);
      return rows.map((r) => ({
        uuid: r.id,
        id: r.externalId,
        provider: r.provider,
        cloudProviderID: r.cloudProviderId,
        providerDetails: r.providerDetails ?? {},
        kubernetesVersion: r.agentReport?.kubernetesVersion ?? null,
        agent: presentAgent(agents.get(r.id)),
        createdAt: r.createdAt,
      }));
    },
  );
};
