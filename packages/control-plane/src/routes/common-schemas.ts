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

const ROLE_DESCRIPTION =
  "`admin`: everything in the project, users and tokens included; `member`: clusters, nodes, cloud providers, " +
  "rollouts, kubeconfigs, web CLI; `reader`: every read except kubeconfigs and web CLI tokens";
const roleSchema = (description: string) =>
  Type.Union([Type.Literal("admin"), Type.Literal("member"), Type.Literal("reader")], { description });

/** A project role, as answers show it and bodies take it. */
export const RoleSchema = roleSchema(ROLE_DESCRIPTION);
/** The role member of a create body. */
export const NewRoleSchema = Type.Optional(roleSchema(`${ROLE_DESCRIPTION}. Default \`member\``));

/** Route configs: the role each route needs (http/auth.ts). */
export const PUBLIC = { auth: "public" } as const;
export const GLOBAL_ADMIN = { auth: "global-admin" } as const;
export const PROJECT_ADMIN = { auth: "admin" } as const;
export const MEMBER = { auth: "member" } as const;
export const READER = { auth: "reader" } as const;

/** A host by its uuid (the node uuid), in `/v1/hosts/{uuid}/...` paths. */
export const HostParams = Type.Object({ uuid: Type.String({ description: "Host UUID (the node uuid)" }) });

/** The refusals of a route that relays a command to a host's agent: offline or busy 409, the agent's failure 502, no answer 504. */
export const AGENT_RELAY_ERRORS = {
  400: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  409: ErrorBody,
  502: ErrorBody,
  504: ErrorBody,
} as const;
