import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { PUBLIC } from "./common-schemas.ts";

const Status = Type.Object({ status: Type.String() });
const Ready = Type.Object({
  status: Type.String(),
  agentLinks: Type.Object({
    open: Type.Integer({ description: "Agent links held" }),
    limit: Type.Union([Type.Integer(), Type.Null()], {
      description: "The ceiling (KEELSON_AGENT_LINK_LIMIT); null: none",
    }),
  }),
  warnings: Type.Array(Type.String(), { description: "What is near a limit; ready nonetheless" }),
});

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/healthz",
    { config: PUBLIC, schema: { tags: ["health"], security: [], response: { 200: Status } } },
    async () => ({ status: "ok" }),
  );
  app.get(
    "/readyz",
    {
      config: PUBLIC,
      schema: { tags: ["health"], security: [], response: { 200: Ready, 503: Status } },
    },
    async (_request, reply) => {
      const { store, runner } = app.keelson;
      try {
        await store.ping();
      } catch {
        return reply.status(503).send({ status: "database unavailable" });
      }
      if (!runner.isRunning) return reply.status(503).send({ status: "operations runner not running" });
      const { open, limit, near } = app.keelson.agents.links;
      const warnings = near ? [`agent links near their ceiling: ${open} of ${limit}; agents beyond it get 503`] : [];
      return { status: "ready", agentLinks: { open, limit }, warnings };
    },
  );
};
