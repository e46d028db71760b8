import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ApiError } from "../http/errors.ts";
import { ErrorBody } from "./common-schemas.ts";

/**
 * The CA bundle clients pin (extension). Public on purpose: a CA certificate is no secret, and
 * an agent fetches it before it has any credential, accepting it only if its hash matches the
 * KEELSON_CA_HASH it was given (kubeadm's discovery by CA hash).
 */
export const caRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/v1/ca",
    {
      config: { auth: "public" },
      schema: {
        tags: ["identity"],
        summary: "The control plane's CA bundle, PEM (extension)",
        description:
          "The CA certificates that sign the server certificate. `caCertHash` of a join-token answer is the sha256 of the root's DER SubjectPublicKeyInfo (header `x-keelson-ca-hash`). 404 when the server speaks plain HTTP or its certificate files name no CA.",
        response: { 200: Type.String({ description: "application/x-pem-file" }), 404: ErrorBody },
      },
    },
    async (_request, reply) => {
      const tls = app.keelson.tls;
      if (!tls?.caBundlePem || !tls.caCertHash) {
        throw new ApiError(
          404,
          "not_found",
          "this control plane serves no CA bundle (KEELSON_TLS is off, or its files name no CA)",
        );
      }
      return reply.type("application/x-pem-file").header("x-keelson-ca-hash", tls.caCertHash).send(tls.caBundlePem);
    },
  );
};
