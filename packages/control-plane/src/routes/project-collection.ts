import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, type TObject, type TSchema, Type } from "typebox";
import type { RouteAuth } from "../http/auth.ts";
import {
  EmptyReply,
  emptyBodyIsNoOptions,
  errorResponses as errors,
  IDENTITY_TAGS,
  V1ProjectParams,
} from "./common-schemas.ts";

type App = Parameters<FastifyPluginAsyncTypebox>[0];

/** How a collection's create route (`POST /v1/projects/:projectId/{plural}`) takes and answers. */
export interface CollectionCreate<Body extends TObject, Created extends TSchema> {
  summary: string;
  description?: string;
  body: Body;
  /** The body may be left out (options only): it is then validated as `{}`. */
  bodyOptional?: boolean;
  /** The 201 answer; the error statuses it documents besides. */
  created: Created;
  errorCodes: number[];
  /** The credential a create issues, for the audit trail (`project token`, `join token`). */
  issues?: string;
  /** `request` for what depends on how the caller reached this control plane (its URL). */
  run: (projectId: string, body: Static<Body>, request: { protocol: string; host: string }) => Promise<Static<Created>>;
}

/** One of a project's identity collections (tokens, users, join tokens) as its routes see it. */
export interface ProjectCollection<Item extends TSchema, Body extends TObject, Created extends TSchema> {
  /** The path segment and the list body's key: `tokens` → `GET /v1/projects/:projectId/tokens` → `{ tokens: [...] }`. */
  plural: string;
  /** The item id's path parameter, e.g. `tokenId`. */
  idParam: string;
  item: Item;
  /** The role the collection's routes need. */
  config: { auth: RouteAuth };
  listSummary: string;
  deleteSummary: string;
  list: (projectId: string) => Promise<Static<Item>[]>;
  remove: (projectId: string, id: string) => Promise<void>;
  create: CollectionCreate<Body, Created>;
}

/**
 * `POST /v1/projects/:projectId/{plural}`, `GET /v1/projects/:projectId/{plural}` and
 * `DELETE /v1/projects/:projectId/{plural}/:{idParam}`: the create that answers 201 (a secret
 * appears only there), the list without secrets and the delete that answers 200 without a
 * body, alike for every collection, so they are declared once.
 */
export function projectCollectionRoutes<Item extends TSchema, Body extends TObject, Created extends TSchema>(
  app: App,
  c: ProjectCollection<Item, Body, Created>,
): void {
  const { config } = c;
  const base = `/v1/projects/:projectId/${c.plural}`;
  const create = c.create;
  app.post(
    base,
    {
      config: { ...config, ...(create.issues ? { issues: create.issues } : {}) },
      ...(create.bodyOptional ? { preValidation: emptyBodyIsNoOptions } : {}),
      schema: {
        tags: IDENTITY_TAGS,
        summary: create.summary,
        ...(create.description ? { description: create.description } : {}),
        params: V1ProjectParams,
        body: create.body as TObject,
        // Widened: the run's own type already ties the answer to `created`.
        response: { 201: create.created as TSchema, ...errors(...create.errorCodes) },
      },
    },
    async (request, reply) =>
      reply.status(201).send(await create.run(request.params.projectId, request.body as Static<Body>, request)),
  );
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
