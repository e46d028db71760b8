import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { listNodePools } from "../domain/node-pools/node-pools.ts";
import { getProject } from "../domain/projects/projects.ts";
import { ErrorBody, ProjectUuidParams } from "./common-schemas.ts";

const NodePool = Type.Object({
  name: Type.String(),
  uuid: Type.String(),
  cloudProviderUuid: Type.String(),
  cloudProviderName: Type.String(),
});

/** Node pools, v4 and v3 (spec §4.5, §4.7): one per provider account, the same record in both versions. */
export const nodePoolRoutes: FastifyPluginAsyncTypebox = async (app) => {
  for (const version of ["v4", "v3"] as const) {
    app.get(
      `/${version}/:project_uuid/nodePools`,
      {
        schema: {
          tags: ["node pools"],
          summary: `List node pools (${version})`,
          params: ProjectUuidParams,
          response: { 200: Type.Array(NodePool), 403: ErrorBody, 404: ErrorBody },
        },
      },
      async (request) => {
        await getProject(app.keelson.db, request.params.project_uuid);
        return listNodePools(app.keelson.db, request.params.project_uuid);
      },
    );
  }
};
