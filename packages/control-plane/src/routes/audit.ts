import { Readable } from "node:stream";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { allAuditRecords, listAuditRecords } from "../audit/records.ts";
import { callerOf } from "../http/auth.ts";
import { forbidden } from "../http/errors.ts";
import { errorResponses as errors, PROJECT_ADMIN, Timestamp } from "./common-schemas.ts";

const Nullable = (t: ReturnType<typeof Type.String>) => Type.Union([t, Type.Null()]);

const AuditRecord = Type.Object({
  id: Type.String(),
  at: Timestamp,
  actor: Type.Union(
    [Type.Literal("admin"), Type.Literal("token"), Type.Literal("session"), Type.Literal("anonymous")],
    {
      description:
        "`admin`: the global admin token; `token`: a project token; `session`: a login; `anonymous`: no token",
    },
  ),
  userId: Nullable(Type.String()),
  tokenId: Nullable(Type.String()),
  projectId: Nullable(Type.String()),
  source: Type.String({ description: "The client address (X-Forwarded-For only from KEELSON_TRUST_PROXY)" }),
  method: Type.String(),
  route: Type.String({ description: "The route's path template, e.g. /v4/:projectId/clusters" }),
  target: Nullable(
    Type.String({ description: "The id the request acted on or created; a refused login's project/user" }),
  ),
  status: Type.Union([Type.Integer(), Type.Null()], {
    description: "The HTTP status answered; null: the change committed but the answer was never recorded",
  }),
  operationId: Nullable(Type.String({ description: "The operation the request started" })),
  credential: Nullable(Type.String({ description: "What credential the request issued (never the credential)" })),
});

const Query = Type.Object(
  {
    since: Type.Optional(Type.String({ description: "ISO-8601: records at or after" })),
    until: Type.Optional(Type.String({ description: "ISO-8601: records at or before" })),
    user: Type.Optional(Type.String({ description: "A user id" })),
    project: Type.Optional(Type.String({ description: "A project id (a project admin sees only its own)" })),
    target: Type.Optional(Type.String({ description: "A target id" })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, description: "Page size, default 100" })),
    cursor: Type.Optional(Type.String({ description: "The previous page's nextCursor" })),
    format: Type.Optional(
      Type.Literal("jsonl", { description: "JSON lines of every record selected (also Accept: application/x-ndjson)" }),
    ),
  },
  { additionalProperties: false },
);

/** The audit trail (issue 16), oldest first: for the global admin, and for a project admin its project's. */
export const auditRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db } = app.keelson;
  app.get(
    "/v1/audit",
    {
      config: PROJECT_ADMIN,
      schema: {
        tags: ["audit"],
        summary: "Audit records: every change, login and credential issued (extension)",
        description:
          "Oldest first, filtered by time, user, project and target, paginated by `nextCursor`. A project admin " +
          "sees its own project's records only. `format=jsonl` (or `Accept: application/x-ndjson`) answers every " +
          "selected record as JSON lines, for a log shipper. Records are kept KEELSON_AUDIT_RETENTION_DAYS.",
        querystring: Query,
        response: {
          200: Type.Object({ records: Type.Array(AuditRecord), nextCursor: Nullable(Type.String()) }),
          ...errors(400, 403),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      const q = request.query;
      let projectId = q.project;
      if (caller.kind === "project") {
        if (projectId !== undefined && projectId !== caller.projectId) {
          throw forbidden("a project admin sees its own project's audit records only");
        }
        projectId = caller.projectId;
      }
      const filter = { since: q.since, until: q.until, userId: q.user, projectId, target: q.target, cursor: q.cursor };
      const jsonl = q.format === "jsonl" || (request.headers.accept ?? "").includes("application/x-ndjson");
      if (!jsonl) return listAuditRecords(db, { ...filter, limit: q.limit ?? 100 });
      // The first page is read before answering, so bad filters still get a 400 in the API's shape.
      const first = await listAuditRecords(db, { ...filter, limit: 1 });
      const lines = async function* () {
        if (first.records.length === 0) return;
        for await (const record of allAuditRecords(db, filter)) yield `${JSON.stringify(record)}\n`;
      };
      // A stream goes out as it is (Fastify serializes only objects); the 200 schema describes the JSON page.
      return reply.type("application/x-ndjson").send(Readable.from(lines()) as never);
    },
  );
};
