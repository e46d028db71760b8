import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import {
  createJoinToken,
  JOIN_TOKEN_DEFAULT_MINUTES,
  JOIN_TOKEN_MAX_MINUTES,
  listJoinTokens,
  revokeJoinToken,
} from "../domain/identity/join-tokens.ts";
import { agentInstallCommand } from "../domain/install/agent-install.ts";
import { baseUrlOf } from "../http/base-url.ts";
import { PROJECT_ADMIN, Timestamp } from "./common-schemas.ts";
import { projectCollectionRoutes } from "./project-collection.ts";

/** Agents' one-time join tokens (identity extension): shown once, stored hashed, spent by one registration. */

const IssuedJoinToken = Type.Object({
  id: Type.String(),
  token: Type.String({ description: "One-time agent registration token. Shown only in this response." }),
  projectId: Type.String(),
  expiresAt: Timestamp,
  createdAt: Timestamp,
  caCertHash: Type.Union([Type.String({ pattern: "^sha256:[0-9a-f]{64}$" }), Type.Null()], {
    description:
      "KEELSON_CA_HASH for the agent: sha256 of the DER SubjectPublicKeyInfo of the CA that signs the server certificate (kubeadm's form). null when the server speaks plain HTTP or names no CA.",
  }),
  installCommand: Type.Union([Type.String(), Type.Null()], {
    description:
      "The line to paste, as root, on a new host: it fetches the CA bundle, keeps the certificate with `caCertHash` (refusing if none has it), fetches GET /v1/install/agent.sh verified against it alone, and runs it with this token. Over plain HTTP only for a loopback control plane; null otherwise (plain HTTP elsewhere, or no CA). The URL is KEELSON_PUBLIC_URL, else the address this request came to.",
  }),
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

  projectCollectionRoutes(app, {
    plural: "joinTokens",
    idParam: "joinTokenId",
    item: JoinTokenInfo,
    config: PROJECT_ADMIN,
    listSummary: "List a project's join tokens without their secrets (extension)",
    deleteSummary: "Revoke a join token (extension)",
    list: (projectId) => listJoinTokens(db, projectId),
    remove: (projectId, id) => revokeJoinToken(db, projectId, id),
    create: {
      summary: "Issue a one-time agent join token (extension)",
      description: "An agent registers with it once, before it expires.",
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
      bodyOptional: true,
      issues: "join token",
      created: IssuedJoinToken,
      errorCodes: [400, 403, 404],
      run: async (projectId, body, request) => {
        const issued = await createJoinToken(db, projectId, body);
        const caCertHash = app.keelson.tls?.caCertHash ?? null;
        const url = baseUrlOf(app.keelson.settings.publicUrl, request);
        return { ...issued, caCertHash, installCommand: agentInstallCommand(url, caCertHash, issued.token) };
      },
    },
  });
};
