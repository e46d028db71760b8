import type { HostRecord } from "@keelson/protocol";
import { UpgradeRequestError } from "@keelson/protocol";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, LogController } from "fastify";
import type { Logger } from "pino";
import { UpgradeBusyError } from "../upgrade/upgrader.ts";
import type { AgentMetrics } from "./metrics.ts";
import type { TokenCheck } from "./token-check.ts";

/**
 * The host-agent interface on KEELSON_AGENT_LISTEN (spec §4.9): the host record and the
 * self-upgrade. Errors are the control plane's JSON shape `{code, message, field?}`.
 */
export interface LocalApiOptions {
  hostId: string;
  tokens: TokenCheck;
  hostRecord: () => HostRecord;
  /** Validates and starts an upgrade; throws UpgradeRequestError (400) or UpgradeBusyError (409). */
  upgrade: (body: unknown) => { accepted: boolean; status: "running" | "updating" };
  log: Logger;
  /** Served at GET /metrics, behind the same token check as the host record. */
  metrics: AgentMetrics;
}

class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export function buildLocalApi(options: LocalApiOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // Clients that know the control plane's `/resmgr/v1/hosts` paths work here too.
    rewriteUrl: (req) => (req.url?.startsWith("/resmgr/v1/") ? req.url.slice("/resmgr".length) : (req.url ?? "/")),
    bodyLimit: 64 * 1024,
  });

  app.setErrorHandler((error: FastifyError | HttpError, _request, reply) => {
    if (error instanceof HttpError) {
      return reply
        .status(error.statusCode)
        .send({ code: error.code, message: error.message, ...(error.field ? { field: error.field } : {}) });
    }
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own 4xx: unparsable JSON, wrong content type, oversize body.
      return reply.status(status).send({ code: "invalid_request", message: error.message, field: "body" });
    }
    options.log.error({ err: error }, "local API error");
    return reply.status(500).send({ code: "internal", message: "internal error" });
  });
  app.setNotFoundHandler((request, reply) => {
    reply
      .status(404)
      .send({ code: "route_not_found", message: `no route ${request.method} ${request.url.split("?")[0]}` });
  });

  app.get("/healthz", async () => ({ status: "ok" }));

  app.register(async (secured) => {
    secured.addHook("onRequest", async (request) => {
      const header = request.headers["x-auth-token"];
      const verdict = await options.tokens.check(Array.isArray(header) ? header[0] : header);
      if (!verdict.ok) throw new HttpError(403, "forbidden", verdict.reason);
    });

    secured.get("/metrics", async (_request, reply) => {
      reply.type(options.metrics.registry.contentType);
      return options.metrics.registry.metrics();
    });

    const knownHost = (hostId: string) => {
      if (hostId !== options.hostId) throw new HttpError(404, "not_found", `host ${hostId} is not this host`);
    };

    secured.get<{ Params: { hostId: string } }>("/v1/hosts/:hostId", async (request) => {
      knownHost(request.params.hostId);
      return options.hostRecord();
    });

    secured.put<{ Params: { hostId: string } }>("/v1/hosts/:hostId/hostagent", async (request) => {
      knownHost(request.params.hostId);
      try {
        return options.upgrade(request.body);
      } catch (err) {
        if (err instanceof UpgradeRequestError) throw new HttpError(400, "invalid_field", err.message, err.field);
        if (err instanceof UpgradeBusyError) throw new HttpError(409, "conflict", err.message);
        throw err;
      }
    });
  });
  return app;
}
