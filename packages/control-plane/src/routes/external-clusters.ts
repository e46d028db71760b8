import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  checkRegistration,
  EXTERNAL_PROVIDERS,
  findExternalCluster,
} from "../domain/external-clusters/external-clusters.ts";
import { getProject } from "../domain/projects/projects.ts";
import { notImplemented } from "../http/errors.ts";
import { errorResponses, NoBody } from "./common-schemas.ts";

const TAGS = ["external clusters"];

const errors = errorResponses;

const ProjectParams = Type.Object({ projectId: Type.String({ description: "Project UUID" }) });
const ClusterParams = Type.Object({
  projectId: Type.String({ description: "Project UUID" }),
  clusterID: Type.String({ description: "Keelson's id of the external cluster, or its id at the provider" }),
});

const Registration = Type.Object({
  id: Type.String({ description: "The cluster's identifier at its provider" }),
  provider: Type.String({
    description: `The managed Kubernetes service: ${Object.entries(EXTERNAL_PROVIDERS)
      .map(([provider, cloud]) => `${provider} (a ${cloud} account)`)
      .join(", ")}`,
  }),
  cloudProviderID: Type.String({ description: "UUID of the cloud provider account the cluster runs in" }),
  providerDetails: Type.Object(
    { region: Type.Optional(Type.String({ description: "Region of the cluster; required for eks" })) },
    { additionalProperties: true, description: "Cloud-specific parameters" },
  ),
});

const Discovered = Type.Array(
  Type.Object(
    {
      id: Type.String(),
      provider: Type.String(),
      cloudProviderID: Type.String(),
      providerDetails: Type.Object({}, { additionalProperties: true }),
    },
    { additionalProperties: true },
  ),
);

const NO_DRIVERS = "needs the cloud drivers, which this server does not have";

/**
 * External clusters (spec §4.2). Everything that can be answered from the database is: body
 * checks (400), unknown accounts and clusters (404), duplicates (409). What needs a cloud answers
 * 501 and says so. See routes/catalogue.ts for why discover asks for a token.
 */
export const externalClusterRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;

  app.get(
    "/v4/:projectId/externalClusters/discover",
    {
      schema: {
        tags: TAGS,
        summary: "External clusters available to be registered",
        description: "Empty: this server has no cloud drivers to list clusters from the clouds.",
        params: ProjectParams,
        response: { 200: Discovered, ...errors(403, 404) },
      },
    },
    async (request) => {
      await getProject(keelson.db, request.params.projectId);
      return [];
    },
  );

  app.post(
    "/v4/:projectId/externalClusters/register",
    {
      schema: {
        tags: TAGS,
        summary: "Register an external cluster",
        description: `The body is checked (400), the account must exist (404) and be of the provider's cloud (400), the cluster must not be registered yet (409); registering itself ${NO_DRIVERS} and answers 501.`,
        params: ProjectParams,
        body: Registration,
        response: { 200: NoBody, ...errors(400, 403, 404, 409, 501) },
      },
    },
    async (request) => {
      await getProject(keelson.db, request.params.projectId);
      await checkRegistration(keelson.db, request.params.projectId, request.body);
      throw notImplemented(`registering external clusters ${NO_DRIVERS}`);
    },
  );

  app.post(
    "/v4/:projectId/externalClusters/:clusterID/deregister",
    {
      schema: {
        tags: TAGS,
        summary: "Deregister an external cluster",
        description: `404 for a cluster that is not registered; deregistering ${NO_DRIVERS} and answers 501.`,
        params: ClusterParams,
        response: { 200: NoBody, ...errors(403, 404, 501) },
      },
    },
    async (request) => {
      await findExternalCluster(keelson.db, request.params.projectId, request.params.clusterID);
      throw notImplemented(`deregistering external clusters ${NO_DRIVERS}`);
    },
  );

  app.get(
    "/v4/:projectId/externalClusters/:clusterID/deploymentYAML",
    {
      schema: {
        tags: TAGS,
        summary: "Deployment YAML of the agent for a private external cluster",
        description: `application/octet-stream once available; 404 for a cluster that is not registered; the YAML ${NO_DRIVERS} and answers 501.`,
        params: ClusterParams,
        produces: ["application/octet-stream", "application/json"],
        response: {
          200: Type.String({ description: "Deployment YAML", contentMediaType: "application/octet-stream" }),
          ...errors(403, 404, 501),
        },
      },
    },
    async (request) => {
      await findExternalCluster(keelson.db, request.params.projectId, request.params.clusterID);
      throw notImplemented(`the deployment YAML of external clusters ${NO_DRIVERS}`);
    },
  );
};
