import type { FastifyRequest } from "fastify";
import { Type } from "typebox";

export const ErrorBody = Type.Object(
  {
    code: Type.String({ description: "Stable machine-readable error code" }),
    message: Type.String({ description: "What went wrong, naming the field and the rule for bad input" }),
    field: Type.Optional(Type.String({ description: "The offending field, for 400s about one field" })),
  },
  { description: "Error" },
);

/** A 200 answer without a body, as the spec describes most writes. */
export const NoBody = Type.Null({ description: "No body" });

/** Response schemas for the error statuses a route can answer, e.g. `errorResponses(400, 403, 404)`. */
export const errorResponses = (...codes: number[]) => Object.fromEntries(codes.map((code) => [code, ErrorBody]));

/** Answers without a body (send() with no payload); the schema only documents that. */
export const EmptyReply = Type.Unsafe<undefined>({ description: "No body" });

export const Timestamp = Type.String({ description: "ISO-8601 UTC timestamp" });

const ProjectUuid = Type.String({ description: "Project UUID" });

/** The project path parameter as most spec paths spell it: `/v3/:project_uuid/...`. */
export const ProjectUuidParams = Type.Object({ project_uuid: ProjectUuid });

/** The project path parameter of the spec paths that spell it `projectId` (`/v4/:projectId/...`). */
export const ProjectIdParams = Type.Object({ projectId: ProjectUuid });

/** The `/v1/projects/:projectId/...` path parameter. */
export const V1ProjectParams = Type.Object({ projectId: Type.String() });

/** Options-only bodies may be left out entirely; validate them as `{}`. */
export async function emptyBodyIsNoOptions(request: FastifyRequest): Promise<void> {
  request.body ??= {};
}

/** The OpenAPI tag of the identity routes (projects, tokens, users, join tokens, login). */
export const IDENTITY_TAGS = ["identity"];

/** Route config of the routes only the admin token may call. */
export const ADMIN_ONLY = { auth: "admin" } as const;
