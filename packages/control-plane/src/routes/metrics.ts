import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";

/** `GET /metrics`: the Prometheus text exposition format (metrics/registry.ts says what is in it). */
export const metricsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/metrics",
    {
      config: { auth: "scrape" },
      schema: {
        tags: ["health"],
        description: "Prometheus metrics in the text exposition format (README, Metrics).",
        produces: ["text/plain"],
        response: { 200: Type.String() },
      },
    },
    async (_request, reply) => {
      const { metrics } = app.keelson;
      reply.type(metrics.contentType);
      return metrics.text();
    },
  );
};
