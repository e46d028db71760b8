import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { callerOf, canSeeProject } from "../http/auth.ts";
import { notFound } from "../http/errors.ts";
import { listOperations, type OperationSummary, operationById } from "../runner/store.ts";
import { ErrorBody, READER } from "./common-schemas.ts";

const Operation = Type.Object({
  uuid: Type.String(),
  projectId: Type.String(),
  kind: Type.String({ description: "For example cluster.create, cluster.update, cluster.delete" }),
  targetType: Type.String(),
  targetUuid: Type.String(),
  state: Type.Union([
    Type.Literal("pending"),
    Type.Literal("running"),
    Type.Literal("succeeded"),
    Type.Literal("failed"),
  ]),
  step: Type.Integer({ description: "Steps completed so far" }),
  attempts: Type.Integer({ description: "How many times the runner started it (more than 1 after a restart)" }),
  error: Type.Union([Type.String(), Type.Null()]),
  params: Type.Object({}, { additionalProperties: true }),
  createdAt: Type.String(),
  startedAt: Type.Union([Type.String(), Type.Null()]),
  finishedAt: Type.Union([Type.String(), Type.Null()]),
  replica: Type.Union([Type.String(), Type.Null()], {
    description: "The control-plane replica that holds it, or last held it (GET /v1/replicas); null while unclaimed",
  }),
});

function present(op: OperationSummary) {
  return {
    uuid: op.id,
    projectId: op.projectId,
    kind: op.kind,
    targetType: op.targetType,
    targetUuid: op.targetId,
    state: op.state,
    step: op.step ?? 0,
    attempts: op.attempts,
    error: op.error,
    params: op.params,
    createdAt: op.createdAt,
    startedAt: op.startedAt,
    finishedAt: op.finishedAt,
    replica: op.owner,
  };
}

export const operationRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/v4/:project_uuid/operations",
    {
      config: READER,
      schema: {
        tags: ["operations (extension)"],
        summary: "The project's operations, newest first",
        params: Type.Object({ project_uuid: Type.String() }),
        querystring: Type.Object({
          target: Type.Optional(Type.String({ description: "Only operations on this target (e.g. a cluster uuid)" })),
          state: Type.Optional(
            Type.Union([
              Type.Literal("pending"),
              Type.Literal("running"),
              Type.Literal("succeeded"),
              Type.Literal("failed"),
            ]),
          ),
          limit: Type.Integer({ minimum: 1, maximum: 1000, default: 100 }),
        }),
        response: { 200: Type.Array(Operation), 400: ErrorBody, 403: ErrorBody },
      },
    },
    async (request) => {
      const { target, state, limit } = request.query;
      return (
        await listOperations(app.keelson.db, request.params.project_uuid, {
          ...(target ? { targetId: target } : {}),
          ...(state ? { state } : {}),
          limit,
        })
      ).map(present);
    },
  );

  app.get(
    "/v1/operations/:uuid",
    {
      config: READER,
      schema: {
        tags: ["operations (extension)"],
        summary: "One operation",
        description:
          "The operation with this uuid, from any project the caller may see; one of another project is a 404 like a missing one.",
        params: Type.Object({ uuid: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: { 200: Operation, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => {
      const op = await operationById(app.keelson.db, request.params.uuid);
      if (!op || !canSeeProject(callerOf(request), op.projectId)) throw notFound("operation", request.params.uuid);
      return present(op);
    },
  );
};
