import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  createJoinToken,
  JOIN_TOKEN_DEFAULT_MINUTES,
  JOIN_TOKEN_MAX_MINUTES,
  listJoinTokens,
  revokeJoinToken,
} from "../domain/identity/join-tokens.ts";
import {
  EmptyReply,
  emptyBodyIsNoOptions,
  errorResponses as errors,
  IDENTITY_TAGS,
  Timestamp,
  V1ProjectParams,
} from "./common-schemas.ts";

/** Agents' one-time join tokens (identity extension): shown once, stored hashed, spent by one registration. */

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

export const joinTokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  app.post(
    "/v1/projects/:projectId/joinTokens",
    {
      preValidation: emptyBodyIsNoOptions,
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Issue a one-time agent join token (extension)",
        description: "Admin or a token of this project. An agent registers with it once, before it expires.",
        params: V1ProjectParams,
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
        tags: IDENTITY_TAGS,
        summary: "List a project's join tokens without their secrets (extension)",
        params: V1ProjectParams,
        response: { 200: Type.Object({ joinTokens: Type.Array(JoinTokenInfo) }), ...errors(403, 404) },
      },
    },
    async (request) => ({ joinTokens: listJoinTokens(db, request.params.projectId) }),
  );

  app.delete(
    "/v1/projects/:projectId/joinTokens/:joinTokenId",
    {
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Revoke a join token (extension)",
        params: Type.Object({ projectId: Type.String(), joinTokenId: Type.String() }),
        response: { 200: EmptyReply, ...errors(403, 404) },
      },
    },
    async (request, reply) => {
      revokeJoinToken(db, request.params.projectId, request.params.joinTokenId);
      return reply.status(200).send();
    },
  );
};
