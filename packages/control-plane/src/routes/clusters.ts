import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { CLUSTER_CHANGES_RETENTION_MS, clusterChangeStamp } from "@keelson/db";
import { NodeV4 } from "@keelson/protocol";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { createCluster, deleteCluster, updateCluster, type WriteResult } from "../domain/clusters/clusters.ts";
import { presentClusterV3, presentClusterV4 } from "../domain/clusters/present/presenters.ts";
import { clusterReadSchemaV3, clusterReadSchemaV4 } from "../domain/clusters/present/read-schema.ts";
import type { ApiVersion } from "../domain/clusters/spec/fields.ts";
import { findCluster, getClusterViewUnless, listClusterViews, listClusterViewsPage } from "../domain/clusters/views.ts";
import { listClusterNodeViews } from "../domain/nodes/nodes.ts";
import { presentNodeV4 } from "../domain/nodes/present.ts";
import { baseUrlOf } from "../http/base-url.ts";
import { sendCachedJson } from "../http/json-answer.ts";
import { sendNoBody } from "../http/no-body.ts";
import { PAGING_EXTENSION, PageQuery, pageRequest } from "../http/paging.ts";
import { type Produced, SnapshotCache } from "../http/snapshot-cache.ts";
import { warnIgnoredFields } from "../http/warnings.ts";
import {
  ClusterWriteBody,
  CreatedCluster,
  clusterErrors,
  FieldValidationQuery,
  ProjectClusterParams,
} from "./cluster-schemas.ts";
import { MEMBER, NoBody, ProjectIdParams, ProjectUuidParams, READER } from "./common-schemas.ts";

const presenters = { v3: presentClusterV3, v4: presentClusterV4 } as const;
// Exact read schemas: they document every field in /openapi.json and let the serializer compile.
const readSchemas = { v3: clusterReadSchemaV3, v4: clusterReadSchemaV4 } as const;

function writeOptions(version: ApiVersion, query: { fieldValidation?: string }) {
  return { version, strict: query.fieldValidation === "Strict" };
}

function reportIgnored(reply: FastifyReply, query: { fieldValidation?: string }, result: WriteResult): void {
  if (query.fieldValidation !== "Ignore") warnIgnoredFields(reply, result.ignored);
}

export const clusterRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  // Cluster records depend on the database and the (immutable) catalogue only: cached under the
  // stamp of the database's log of changes to what they show (schema.ts clusterChanges), the
  // project's for a list and the cluster's for a record, so a rollout's heartbeats and reports,
  // and a change to another cluster or project, recompute nothing. A record is read with its
  // stamp in one statement (SnapshotCache.unless); a list looks at its stamp first, so the
  // concurrent requests that miss a list of thousands compute it once. They are sent as JSON text,
  // so the response schemas document them; cluster-presenters.test.ts checks the presenters
  // against those schemas.
  const snapshots = new SnapshotCache({
    maxBytes: k.settings.listCacheBytes,
    // A stamp confirmed this recently cannot have missed a row that was written and pruned since.
    maxAgeMs: CLUSTER_CHANGES_RETENTION_MS / 2,
  });
  /** Sends the list `read()` gives, computed again only when what it shows has changed. */
  const sendList = async (
    request: FastifyRequest,
    reply: FastifyReply,
    key: string,
    projectId: string,
    read: () => Promise<Produced>,
  ) => sendCachedJson(request, reply, await snapshots.get(key, () => clusterChangeStamp(k.db, projectId), read));

  for (const version of ["v4", "v3"] as const) {
    const tags = [`clusters ${version}`];
    const present = presenters[version];
    // The spec names the project parameter `projectId` on v4 create and `project_uuid` elsewhere.
    const createPath = version === "v4" ? "/v4/:projectId/clusters" : "/v3/:project_uuid/clusters";

    app.post(
      createPath,
      {
        config: MEMBER,
        schema: {
          tags,
          summary: `Create a cluster (${version})`,
          params: version === "v4" ? ProjectIdParams : ProjectUuidParams,
          querystring: FieldValidationQuery,
          body: ClusterWriteBody,
          response: { 200: CreatedCluster, ...clusterErrors },
        },
      },
      async (request, reply) => {
        const params = request.params as { projectId?: string; project_uuid?: string };
        const projectId = (params.projectId ?? params.project_uuid) as string;
        const result = await createCluster(k, projectId, request.body, {
          ...writeOptions(version, request.query),
          controlPlane: baseUrlOf(k.settings.publicUrl, request),
        });
        reportIgnored(reply, request.query, result);
        const base = request.originalUrl.split("?")[0]?.replace(/\/$/, "");
        reply.header("location", `${base}/${result.cluster.id}`);
        return { uuid: result.cluster.id };
      },
    );

    app.get(
      `/${version}/:project_uuid/clusters`,
      {
        config: READER,
        schema: {
          tags,
          summary: `List the project's clusters (${version} read set)`,
          params: ProjectUuidParams,
          querystring: PageQuery,
          response: { 200: Type.Array(readSchemas[version]), 400: clusterErrors[400], 403: clusterErrors[403] },
          ...PAGING_EXTENSION,
        },
      },
      async (request, reply) => {
        const projectId = request.params.project_uuid;
        const page = pageRequest(request.query);
        const key = `${version}:list:${projectId}${page ? `:${request.query.limit ?? ""}:${request.query.continue ?? ""}` : ""}`;
        return sendList(request, reply, key, projectId, async () => {
          if (!page) {
            const { value, stamp } = await listClusterViews(k.db, k.catalogue, projectId);
            return { text: JSON.stringify(value.map(present)), stamp };
          }
          const { value, stamp } = await listClusterViewsPage(k.db, k.catalogue, projectId, page);
          return { text: JSON.stringify(value.items.map(present)), nextPage: value.next, stamp };
        });
      },
    );

    app.get(
      `/${version}/:project_uuid/clusters/:uuid`,
      {
        config: READER,
        schema: {
          tags,
          summary: `Read a cluster (${version} read set)`,
          params: ProjectClusterParams,
          response: { 200: readSchemas[version], 403: clusterErrors[403], 404: clusterErrors[404] },
        },
      },
      async (request, reply) => {
        const { project_uuid, uuid } = request.params;
        const answer = await snapshots.unless(`${version}:one:${project_uuid}:${uuid}`, async (known) => {
          const { stamp, view } = await getClusterViewUnless(k.db, k.catalogue, project_uuid, uuid, known);
          return { stamp, produced: view && JSON.stringify(present(view)) };
        });
        return sendCachedJson(request, reply, answer);
      },
    );

    app.put(
      `/${version}/:project_uuid/clusters/:uuid`,
      {
        config: MEMBER,
        schema: {
          tags,
          summary: `Update a cluster (${version} update set)`,
          params: ProjectClusterParams,
          querystring: FieldValidationQuery,
          body: ClusterWriteBody,
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request, reply) => {
        const { project_uuid, uuid } = request.params;
        const result = await updateCluster(k, project_uuid, uuid, request.body, writeOptions(version, request.query));
        reportIgnored(reply, request.query, result);
        return sendNoBody(reply);
      },
    );

    app.delete(
      `/${version}/:project_uuid/clusters/:uuid`,
      {
        config: MEMBER,
        schema: {
          tags,
          summary: `Delete a cluster (${version})`,
          params: ProjectClusterParams,
          response: { 200: NoBody, ...clusterErrors },
        },
      },
      async (request, reply) => {
        await deleteCluster(k, request.params.project_uuid, request.params.uuid);
        return sendNoBody(reply);
      },
    );
  }

  app.get(
    "/v4/:project_uuid/clusters/:uuid/nodes",
    {
      config: READER,
      schema: {
        tags: ["clusters v4"],
        summary: "The nodes attached to a cluster (v4 node set)",
        params: ProjectClusterParams,
        response: { 200: Type.Array(NodeV4), 403: clusterErrors[403], 404: clusterErrors[404] },
      },
    },
    async (request) => {
      const { project_uuid, uuid } = request.params;
      await findCluster(k.db, project_uuid, uuid);
      return (await listClusterNodeViews(k.db, project_uuid, uuid)).map((v) => presentNodeV4(v.row, v.extras));
    },
  );
};
