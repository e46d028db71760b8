import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { NodeV3, NodeV4 } from "@keelson/protocol";
import { Type } from "typebox";
import { getNodeView, listNodeViews, listNodeViewsPage, updateNode } from "../domain/nodes/nodes.ts";
import { presentNodeV3, presentNodeV4 } from "../domain/nodes/present.ts";
import { sendTaggedJson } from "../http/json-answer.ts";
import { sendNoBody } from "../http/no-body.ts";
import { PAGING_EXTENSION, PageQuery, pageRequest } from "../http/paging.ts";
import { ErrorBody, MEMBER, NoBody, ProjectUuidParams, READER } from "./common-schemas.ts";

const NodeParams = Type.Object({
  project_uuid: Type.String({ description: "Project UUID" }),
  uuid: Type.String({ description: "Node UUID" }),
});
/**
 * §4.3: only `clusterUuid` may be sent, and only null (detach). The schema takes any object so
 * the domain can answer every other body with a 400 that says what is allowed.
 */
const NodeUpdateBody = Type.Object(
  {
    clusterUuid: Type.Optional(
      Type.Union([Type.Null(), Type.Unknown()], { description: "Must be null: detaches the node from its cluster" }),
    ),
  },
  {
    additionalProperties: true,
    description: 'Exactly {"clusterUuid": null}; any other body is a 400 (only the cluster can be cleared)',
  },
);
const errors = { 400: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };

/** Nodes v4 (§4.3) and v3 (§4.7): the project's registered hosts. */
export const nodeRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;
  const versions = [
    { version: "v4", record: NodeV4, present: presentNodeV4 },
    { version: "v3", record: NodeV3, present: presentNodeV3 },
  ] as const;

  for (const { version, record, present } of versions) {
    const tags = [`nodes ${version}`];
    app.get(
      `/${version}/:project_uuid/nodes`,
      {
        config: READER,
        schema: {
          tags,
          summary: `List the project's nodes (${version} set, plus agentConnected and lastSeen)`,
          params: ProjectUuidParams,
          querystring: PageQuery,
          response: { 200: Type.Array(record), 400: ErrorBody, 403: ErrorBody },
          ...PAGING_EXTENSION,
        },
      },
      async (request, reply) => {
        const projectId = request.params.project_uuid;
        const page = pageRequest(request.query);
        if (!page) {
          const views = await listNodeViews(db, projectId);
          return sendTaggedJson(
            request,
            reply,
            views.map((v) => present(v.row, v.extras)),
          );
        }
        const paged = await listNodeViewsPage(db, projectId, page);
        return sendTaggedJson(
          request,
          reply,
          paged.items.map((v) => present(v.row, v.extras)),
          paged.next,
        );
      },
    );

    app.get(
      `/${version}/:project_uuid/nodes/:uuid`,
      {
        config: READER,
        schema: {
          tags,
          summary: `Read a node (${version} set)`,
          params: NodeParams,
          response: { 200: record, ...errors },
        },
      },
      async (request) => {
        const view = await getNodeView(db, request.params.project_uuid, request.params.uuid);
        return present(view.row, view.extras);
      },
    );

    app.put(
      `/${version}/:project_uuid/nodes/:uuid`,
      {
        config: MEMBER,
        schema: {
          tags,
          summary: "Detach a node from its cluster (body {clusterUuid: null})",
          description:
            "Detaches an attached node like POST .../clusters/{uuid}/detach would (same rules: 409 when etcd would " +
            "lose quorum); an unattached node answers 200 with nothing to do. Any other body is a 400.",
          params: NodeParams,
          body: NodeUpdateBody,
          response: { 200: NoBody, ...errors },
        },
      },
      async (request, reply) => {
        await updateNode(app.keelson, request.params.project_uuid, request.params.uuid, request.body);
        return sendNoBody(reply);
      },
    );
  }
};
