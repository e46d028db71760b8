import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  createProjectToken,
  listTokens,
  revokeToken,
  TOKEN_MAX_EXPIRES_IN_HOURS,
  TOKEN_NAME_MAX_LENGTH,
} from "../domain/identity/project-tokens.ts";
import { Timestamp } from "./common-schemas.ts";
import { projectCollectionRoutes } from "./project-collection.ts";

/** A project's API tokens (identity extension): the secret appears only in the create response; stored hashed. */

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

export const projectTokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;

  projectCollectionRoutes(app, {
    plural: "tokens",
    idParam: "tokenId",
    item: TokenInfo,
    adminOnly: true,
    listSummary: "List a project's tokens without their secrets (extension, admin)",
    deleteSummary: "Revoke a project token or login session (extension, admin)",
    list: (projectId) => listTokens(db, projectId),
    remove: (projectId, id) => revokeToken(db, projectId, id),
    create: {
      summary: "Mint a project API token (extension, admin)",
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
      bodyOptional: true,
      created: IssuedToken,
      errorCodes: [400, 403, 404],
      run: (projectId, body) => createProjectToken(db, projectId, body),
    },
  });
};
