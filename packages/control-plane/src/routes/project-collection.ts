import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, type TSchema, Type } from "typebox";
import type { RouteAuth } from "../http/auth.ts";
import { EmptyReply, errorResponses as errors, IDENTITY_TAGS, V1ProjectParams } from "./common-schemas.ts";

type App = Parameters<FastifyPluginAsyncTypebox>[0];

/** One of a project's identity collections (tokens, users, join tokens) as its list and delete routes see it. */
export interface ProjectCollection<Item extends TSchema> {
  /** The path segment and the list body's key: `tokens` → `GET /v1/projects/:projectId/tokens` → `{ tokens: [...] }`. */
  plural: string;
  /** The item id's path parameter, e.g. `tokenId`. */
  idParam: string;
  item: Item;
  /** The role its list and delete need. */
  config: { auth: RouteAuth };
  listSummary: string;
  deleteSummary: string;
  list: (projectId: string) => Promise<Static<Item>[]>;
  remove: (projectId: string, id: string) => Promise<void>;
}

/**
 * `GET /v1/projects/:projectId/{plural}` and `DELETE /v1/projects/:projectId/{plural}/:{idParam}`:
 * the list without secrets and the delete that answers 200 without a body, alike for every
 * collection, so they are declared once.
 */
export function projectCollectionRoutes<Item extends TSchema>(app: App, c: ProjectCollection<Item>): void {
  const { config } = c;
  const base = `/v1/projects/:projectId/${c.plural}`;
  app.get(
    base,
    {
      config,
      schema: {
        tags: IDENTITY_TAGS,
        summary: c.listSummary,
        params: V1ProjectParams,
        response: { 200: Type.Object({ [c.plural]: Type.Array(c.item) }), ...errors(403, 404) },
      },
    },
    async (request) => ({ [c.plural]: await c.list(request.params.projectId) }),
  );
  app.delete(
    `${base}/:${c.idParam}`,
    {
      config,
      schema: {
        tags: IDENTITY_TAGS,
        summary: c.deleteSummary,
        params: Type.Object({ projectId: Type.String(), [c.idParam]: Type.String() }),
        response: { 200: EmptyReply, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      const params = request.params as Record<string, string>;
      await c.remove(params.projectId as string, params[c.idParam] as string);
      return reply.status(200).send();
    },
  );
}
