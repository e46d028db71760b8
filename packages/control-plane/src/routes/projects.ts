import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import {
  createJoinToken,
  JOIN_TOKEN_DEFAULT_MINUTES,
  JOIN_TOKEN_MAX_MINUTES,
  listJoinTokens,
  revokeJoinToken,
} from "../domain/identity/join-tokens.ts";
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from "../domain/identity/passwords.ts";
import {
  createProjectToken,
  listTokens,
  revokeToken,
  TOKEN_MAX_EXPIRES_IN_HOURS,
  TOKEN_NAME_MAX_LENGTH,
} from "../domain/identity/project-tokens.ts";
import { createUser, deleteUser, listUsers, USER_NAME_MAX_LENGTH } from "../domain/identity/users.ts";
import {
  createProject,
  getProject,
  PROJECT_NAME_PATTERN,
  type ProjectRow,
  projectsVisibleTo,
} from "../domain/projects/projects.ts";
import { callerOf } from "../http/auth.ts";
import { errorResponses } from "./common-schemas.ts";

/**
 * Identity extensions (DESIGN.md "Identity"): projects, their API tokens, users (for the
 * Keystone-style login) and agents' one-time join tokens. Secrets appear only in create
 * responses; everything is stored hashed.
 */

const errors = errorResponses;
/** Answers without a body (send() with no payload); the schema only documents that. */
const NoBody = Type.Unsafe<undefined>({ description: "No body" });
const Timestamp = Type.String({ description: "ISO-8601 UTC timestamp" });

const Project = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Timestamp });
const ProjectParams = Type.Object({ projectId: Type.String() });

const TokenInfo = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  kind: Type.Union([Type.Literal("project"), Type.Literal("session")], {
    description: "`project`: minted by the admin; `session`: from a Keystone-style login",
  }),
  name: Type.Union([Type.String(), Type.Null()]),
  userId: Type.Union([Type.String(), Type.Null()], { description: "The logged-in user of a session token" }),
  expiresAt: Type.Union([Timestamp, Type.Null()], { description: "null: never expires" }),
  createdAt: Timestamp,
});
const IssuedToken = Type.Object({
  id: Type.String(),
  token: Type.String({ description: "The X-Auth-Token. Shown only in this response; store it now." }),
  projectId: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Type.Union([Timestamp, Type.Null()], { description: "null: never expires" }),
  createdAt: Timestamp,
});
const User = Type.Object({ id: Type.String(), projectId: Type.String(), name: Type.String(), createdAt: Timestamp });
const IssuedJoinToken = Type.Object({
  id: Type.String(),
  token: Type.String({ description: "One-time agent registration token. Shown only in this response." }),
  projectId: Type.String(),
  expiresAt: Timestamp,
  createdAt: Timestamp,
});
const JoinTokenInfo = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  expiresAt: Timestamp,
  usedAt: Type.Union([Timestamp, Type.Null()]),
  usedByNodeId: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
});

/** Options-only bodies may be left out entirely; validate them as `{}`. */
async function emptyBodyIsNoOptions(request: FastifyRequest): Promise<void> {
  request.body ??= {};
}

const presentProject = ({ id, name, createdAt }: ProjectRow) => ({ id, name, createdAt });

const tags = ["identity"];
const admin = { auth: "admin" } as const;

export const projectRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  app.get(
    "/v1/projects",
    {
      schema: {
        tags,
        summary: "List projects (extension)",
        description: "The admin token sees every project; any other token sees only its own project.",
        response: { 200: Type.Object({ projects: Type.Array(Project) }), ...errors(403) },
      },
    },
    async (request) => ({ projects: projectsVisibleTo(db, callerOf(request)).map(presentProject) }),
  );

  app.post(
    "/v1/projects",
    {
      config: admin,
      schema: {
        tags,
        summary: "Create a project (extension, admin)",
        description: "The new project gets the built-in `local` cloud provider and its node pool.",
        body: Type.Object(
          {
            name: Type.String({
              pattern: PROJECT_NAME_PATTERN,
              description: "1 to 64 letters, digits, '-', '_' or '.'; unique",
            }),
          },
          { additionalProperties: false },
        ),
        response: { 201: Project, ...errors(400, 403, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(presentProject(createProject(db, request.body.name))),
  );

  app.get(
    "/v1/projects/:projectId",
    {
      schema: {
        tags,
        summary: "Get a project (extension)",
        params: ProjectParams,
        response: { 200: Project, ...errors(403, 404) },
      },
    },
    async (request) => presentProject(getProject(db, request.params.projectId)),
  );

  app.post(
    "/v1/projects/:projectId/tokens",
    {
      config: admin,
      preValidation: emptyBodyIsNoOptions,
      schema: {
        tags,
        summary: "Mint a project API token (extension, admin)",
        params: ProjectParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: TOKEN_NAME_MAX_LENGTH })),
            expiresInHours: Type.Optional(
              Type.Integer({
                minimum: 1,
                maximum: TOKEN_MAX_EXPIRES_IN_HOURS,
                description: "Omit for a token that does not expire",
              }),
            ),
          },
          { additionalProperties: false, description: "May be omitted" },
        ),
        response: { 201: IssuedToken, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => reply.status(201).send(createProjectToken(db, request.params.projectId, request.body)),
  );

  app.get(
    "/v1/projects/:projectId/tokens",
    {
      config: admin,
      schema: {
        tags,
        summary: "List a project's tokens without their secrets (extension, admin)",
        params: ProjectParams,
        response: { 200: Type.Object({ tokens: Type.Array(TokenInfo) }), ...errors(403, 404) },
      },
    },
    async (request) => ({ tokens: listTokens(db, request.params.projectId) }),
  );

  app.delete(
    "/v1/projects/:projectId/tokens/:tokenId",
    {
      config: admin,
      schema: {
        tags,
        summary: "Revoke a project token or login session (extension, admin)",
        params: Type.Object({ projectId: Type.String(), tokenId: Type.String() }),
        response: { 200: NoBody, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      revokeToken(db, request.params.projectId, request.params.tokenId);
      return reply.status(200).send();
    },
  );

  app.post(
    "/v1/projects/:projectId/users",
    {
      config: admin,
      schema: {
        tags,
        summary: "Create a user for the Keystone-style login (extension, admin)",
        description: "The password is stored as an scrypt hash and never returned.",
        params: ProjectParams,
        body: Type.Object(
          {
            name: Type.String({
              minLength: 1,
              maxLength: USER_NAME_MAX_LENGTH,
              description: "Unique in the project; printable, no leading or trailing whitespace",
            }),
            password: Type.String({
              minLength: PASSWORD_MIN_LENGTH,
              maxLength: PASSWORD_MAX_LENGTH,
              writeOnly: true,
            }),
          },
          { additionalProperties: false },
        ),
        response: { 201: User, ...errors(400, 403, 404, 409) },
      },
    },
    async (request, reply) => reply.status(201).send(await createUser(db, request.params.projectId, request.body)),
  );

  app.get(
    "/v1/projects/:projectId/users",
    {
      config: admin,
      schema: {
        tags,
        summary: "List a project's users (extension, admin)",
        params: ProjectParams,
        response: { 200: Type.Object({ users: Type.Array(User) }), ...errors(403, 404) },
      },
    },
    async (request) => ({ users: listUsers(db, request.params.projectId) }),
  );

  app.delete(
    "/v1/projects/:projectId/users/:userId",
    {
      config: admin,
      schema: {
        tags,
        summary: "Delete a user and end its login sessions (extension, admin)",
        params: Type.Object({ projectId: Type.String(), userId: Type.String() }),
        response: { 200: NoBody, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      deleteUser(db, request.params.projectId, request.params.userId);
      return reply.status(200).send();
    },
  );

  app.post(
    "/v1/projects/:projectId/joinTokens",
    {
      preValidation: emptyBodyIsNoOptions,
      schema: {
        tags,
        summary: "Issue a one-time agent join token (extension)",
        description: "Admin or a token of this project. An agent registers with it once, before it expires.",
        params: ProjectParams,
        body: Type.Object(
          {
            expiresInMinutes: Type.Optional(
              Type.Integer({
                minimum: 1,
                maximum: JOIN_TOKEN_MAX_MINUTES,
                description: `Default ${JOIN_TOKEN_DEFAULT_MINUTES}`,
              }),
            ),
          },
          { additionalProperties: false, description: "May be omitted" },
        ),
        response: { 201: IssuedJoinToken, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => reply.status(201).send(createJoinToken(db, request.params.projectId, request.body)),
  );

  app.get(
    "/v1/projects/:projectId/joinTokens",
    {
      schema: {
        tags,
        summary: "List a project's join tokens without their secrets (extension)",
        params: ProjectParams,
        response: { 200: Type.Object({ joinTokens: Type.Array(JoinTokenInfo) }), ...errors(403, 404) },
      },
    },
    async (request) => ({ joinTokens: listJoinTokens(db, request.params.projectId) }),
  );

  app.delete(
    "/v1/projects/:projectId/joinTokens/:joinTokenId",
    {
      schema: {
        tags,
        summary: "Revoke a join token (extension)",
        params: Type.Object({ projectId: Type.String(), joinTokenId: Type.String() }),
        response: { 200: NoBody, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      revokeJoinToken(db, request.params.projectId, request.params.joinTokenId);
      return reply.status(200).send();
    },
  );
};
