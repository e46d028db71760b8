import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { hashSecret } from "../domain/identity/token-hash.ts";
import { errorResponses as errors, GLOBAL_ADMIN, IDENTITY_TAGS } from "./common-schemas.ts";

/** The global admin token's rotation: a leaked admin token stops working at once. */
export const adminTokenRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { keelson } = app;
  app.post(
    "/v1/adminToken/rotate",
    {
      config: { ...GLOBAL_ADMIN, issues: "admin token" },
      schema: {
        tags: IDENTITY_TAGS,
        summary: "Rotate the global admin token (extension, global admin)",
        description:
          "Writes a new admin token where it is kept (the data dir's `admin-token` file; on PostgreSQL the database, " +
          "with a copy in the file) and answers it once; the old token stops working at once on this replica, and on " +
          "the other replicas at their next lease renewal (KEELSON_OPERATION_LEASE_RENEW_MS). " +
          "409 when the token comes from KEELSON_ADMIN_TOKEN, which only the operator can change.",
        response: {
          201: Type.Object({
            token: Type.String({ description: "The new admin token. Shown only in this response." }),
          }),
          ...errors(403, 409),
        },
      },
    },
    async (_request, reply) => {
      const token = await keelson.adminToken.rotate();
      keelson.identity.replaceAdminHash(hashSecret(token));
      return reply.status(201).send({ token });
    },
  );
};
