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
  conditions: Type.Array(
    Type.Object({
      code: Type.Literal("storage_full"),
      message: Type.String(),
      since: Type.String({ format: "date-time" }),
    }),
    { description: "What is wrong but leaves the server serving: `storage_full` (reads work, writes answer 507)" },
  ),
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
      if (app.keelson.drain.draining) return reply.status(503).send({ status: "draining" });
      if (runner.fenced) {
        return reply.status(503).send({ status: "fenced: operation leases not renewed before their deadline" });
      }
      const { open, limit, near } = app.keelson.agents.links;
      const warnings = near ? [`agent links near their ceiling: ${open} of ${limit}; agents beyond it get 503`] : [];
      // A full disk keeps the server ready (200, status "degraded"): reads, logins, kubeconfig
      // downloads and the agent links all still work, and every replica shares the same full
      // disk or database, so taking them out of rotation would turn a write outage into a
      // total one. A monitor reads the condition here; clients get 507 on each write.
      const full = app.keelson.storage.state;
      const conditions = full ? [{ code: "storage_full" as const, message: full.message, since: full.since }] : [];
      return { status: full ? "degraded" : "ready", agentLinks: { open, limit }, warnings, conditions };
    },
  );
};
