import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { discoverExternalClusters } from "../domain/external-clusters/discover.ts";
import { listExternalClusters, registerExternalCluster } from "../domain/external-clusters/external-clusters.ts";
import { getProject } from "../domain/projects/projects.ts";
import { sendNoBody } from "../http/no-body.ts";
import {
  errorResponses as errors,
  MEMBER,
  NoBody,
  ProjectIdParams,
  READER,
  Timestamp,
  V1ProjectParams,
} from "./common-schemas.ts";

const TAGS = ["external clusters"];

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

const Registered = Type.Array(
  Type.Object({
    uuid: Type.String({ description: "Keelson's id of the registration" }),
    id: Type.String(),
    provider: Type.String(),
    cloudProviderID: Type.Union([Type.String(), Type.Null()]),
    providerDetails: ProviderDetails,
    createdAt: Timestamp,
  }),
);

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
      return rows.map((r) => ({
        uuid: r.id,
        id: r.externalId,
        provider: r.provider,
        cloudProviderID: r.cloudProviderId,
        providerDetails: r.providerDetails ?? {},
        createdAt: r.createdAt,
      }));
    },
  );
};
