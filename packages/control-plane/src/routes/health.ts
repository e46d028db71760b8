import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";

const Status = Type.Object({ status: Type.String() });

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/healthz",
    { config: { auth: "public" }, schema: { tags: ["health"], security: [], response: { 200: Status } } },
    async () => ({ status: "ok" }),
  );
  app.get(
    "/readyz",
    {
      config: { auth: "public" },
      schema: { tags: ["health"], security: [], response: { 200: Status, 503: Status } },
    },
    async (_request, reply) => {
      const { db, runner } = app.keelson;
      try {
        db.$client.prepare("select 1").get();
      } catch {
        return reply.status(503).send({ status: "database unavailable" });
      }
      if (!runner.isRunning) return reply.status(503).send({ status: "operations runner not running" });
      return { status: "ready" };
    },
  );
};
