import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { getProject } from "../domain/projects/projects.ts";
import { errorResponses as errors, ProjectIdParams } from "./common-schemas.ts";

const TAGS = ["external clusters"];

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

/**
 * External clusters (spec §4.2): what can be answered from the database. Register, deregister
 * and the agent's deployment YAML need the clouds' own APIs and are not served by this server
 * (issue 12 builds them). See routes/catalogue.ts for why discover asks for a token.
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
        params: ProjectIdParams,
        response: { 200: Discovered, ...errors(403, 404) },
      },
    },
    async (request) => {
      await getProject(keelson.db, request.params.projectId);
      return [];
    },
  );
};
