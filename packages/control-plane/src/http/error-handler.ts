import { databaseUnavailable, storageFull, type UniqueViolation, uniqueViolation } from "@keelson/db";
import type { FastifyError, FastifyInstance } from "fastify";
import { ApiError } from "./errors.ts";

/** Seconds a client is told to wait while the database is away; the pool reconnects by itself. */
export const DATABASE_RETRY_AFTER_S = 5;

/** Tables as the API names their rows in a duplicate's message. */
const ROW_NAMES: Record<string, string> = {
  projects: "project",
  users: "user",
  clusters: "cluster",
  cloud_providers: "cloud provider",
  node_pools: "node pool",
  external_clusters: "external cluster",
  addons: "add-on",
};

/**
 * A unique key taken by a concurrent request (its check ran before the other's insert
 * committed): the answer the check itself gives, 409 `duplicate_name` for a name.
 */
function duplicate(clash: UniqueViolation): ApiError {
  const what = ROW_NAMES[clash.table] ?? clash.table;
  const at = clash.columns.indexOf("name");
  if (at >= 0) {
    const name = clash.values?.[at];
    return new ApiError(
      409,
      "duplicate_name",
      `a ${what} ${name === undefined ? "of that name" : `named "${name}"`} already exists${clash.columns.includes("project_id") ? " in this project" : ""}`,
      "name",
    );
  }
  return new ApiError(409, "conflict", `a ${what} with the same ${clash.columns.join(", ")} already exists`);
}

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

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) {
      if (error.headers) reply.headers(error.headers);
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
    const clash = uniqueViolation(error);
    if (clash) {
      const answer = duplicate(clash);
      return reply.status(answer.statusCode).send(answer.toJSON());
    }
    const full = storageFull(error);
    if (full) {
      // 507 Insufficient Storage: the request was fine and may be sent again once space is
      // freed; the condition shows on /readyz until a write or the probe finds room.
      app.keelson.storage.full(full);
      request.log.warn({ reason: full.reason }, "storage full; answered 507");
      return reply.status(507).send({ code: "storage_full", message: app.keelson.storage.message(full.where) });
    }
    const away = databaseUnavailable(error);
    if (away) {
      // Logged without the error object: drizzle's carries the statement's parameters.
      request.log.warn({ reason: away }, "database unavailable; answered 503");
      return (
        reply
          .status(503)
          .header("retry-after", String(DATABASE_RETRY_AFTER_S))
          // The reason stays in the log: it names the database's address.
          .send({ code: "database_unavailable", message: "the database is not answering; try again shortly" })
      );
    }
    const status = (error as FastifyError).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.status(status).send(frameworkError(status, error as FastifyError));
    }
    request.log.error({ err: error }, "unhandled error");
    return reply.status(500).send({ code: "internal", message: "internal error" });
  });

  // A write that went through: whatever storage was full has room again.
  app.addHook("onResponse", async (request, reply) => {
    if (WRITES.has(request.method) && reply.statusCode < 300) app.keelson.storage.written();
  });

  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send({
      code: "route_not_found",
      message: `no route ${request.method} ${request.url.split("?")[0]}`,
    });
  });
}

/**
 * Fastify's own 4xx errors (`FST_ERR_CTP_INVALID_JSON_BODY` and the like) in the API's
 * vocabulary: clients match on `code`, and Fastify's codes are an implementation detail.
 */
const FRAMEWORK_CODES: Record<string, { code: string; field?: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: "invalid_json", field: "body" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: "invalid_json", field: "body" },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: "body_too_large", field: "body" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: "unsupported_media_type" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: "bad_request" },
  FST_ERR_CTP_EMPTY_TYPE: { code: "unsupported_media_type" },
  FST_ERR_CTP_INVALID_TYPE: { code: "unsupported_media_type" },
};

const STATUS_CODES: Record<number, string> = {
  404: "route_not_found",
  405: "method_not_allowed",
  413: "body_too_large",
  415: "unsupported_media_type",
  429: "too_many_requests",
};

export function frameworkError(status: number, error: FastifyError): { code: string; message: string; field?: string } {
  const known = error.code ? FRAMEWORK_CODES[error.code] : undefined;
  const code = known?.code ?? STATUS_CODES[status] ?? "bad_request";
  return known?.field ? { code, message: error.message, field: known.field } : { code, message: error.message };
}
