import type { FastifyError, FastifyInstance } from "fastify";
import { ApiError } from "./errors.ts";

interface ValidationIssue {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
  keyword?: string;
}

/** Turns an ajv issue into the name of the field it is about (`spec.name`, `auth.identity`). */
function fieldOf(issue: ValidationIssue, context: string | undefined): string {
  const path = (issue.instancePath ?? "").replace(/^\//, "").replaceAll("/", ".");
  const missing = issue.params?.missingProperty ?? issue.params?.additionalProperty;
  const leaf = typeof missing === "string" ? missing : "";
  const full = [path, leaf].filter(Boolean).join(".");
  return full || context || "body";
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) {
      return reply.status(error.statusCode).send(error.toJSON());
    }
    const validation = (error as FastifyError).validation as ValidationIssue[] | undefined;
    if (validation && validation.length > 0) {
      const issue = validation[0] as ValidationIssue;
      const context = (error as FastifyError).validationContext;
      const field = fieldOf(issue, context);
      return reply.status(400).send({
        code: "invalid_request",
        message: `${field}: ${issue.message ?? "is invalid"}`,
        field,
      });
    }
    const status = (error as FastifyError).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.status(status).send({
        code: (error as FastifyError).code ?? "bad_request",
        message: error.message,
      });
    }
    request.log.error({ err: error }, "unhandled error");
    return reply.status(500).send({ code: "internal", message: "internal error" });
  });

  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send({
      code: "route_not_found",
      message: `no route ${request.method} ${request.url.split("?")[0]}`,
    });
  });
}
