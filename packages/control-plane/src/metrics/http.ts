import type { FastifyInstance } from "fastify";
import type { ControlPlaneMetrics } from "./registry.ts";

/**
 * Request latency by method, route pattern and status. The pattern (`/v4/:projectId/clusters`),
 * never the URL: ids in paths would make a series per cluster. Requests no route matched share
 * one label, so a scan of random paths adds nothing.
 */
export function installHttpMetrics(app: FastifyInstance, metrics: ControlPlaneMetrics): void {
  app.addHook("onResponse", async (request, reply) => {
    const route = request.is404 ? "unmatched" : (request.routeOptions.url ?? "unmatched");
    metrics.httpDuration.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
}
