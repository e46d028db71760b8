import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { callerOf, canSeeProject } from "../http/auth.ts";
import { notFound } from "../http/errors.ts";
import { sendCachedJson } from "../http/json-answer.ts";
import { SnapshotCache } from "../http/snapshot-cache.ts";
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

/**
 * An operation as the Operation schema's JSON text, in its order, with the params spliced in as
 * stored: a rollout's name each of its nodes (about 40 KB for 1,000), and a client polls the
 * operation while it runs. The same bytes as serialising the parsed params (the stored text is
 * JSON.stringify's own); operation-get.test.ts compares them.
 */
function operationJson(op: OperationSummary): string {
  const head = JSON.stringify({
    uuid: op.id,
    projectId: op.projectId,
    kind: op.kind,
    targetType: op.targetType,
    targetUuid: op.targetId,
    state: op.state,
    step: op.step ?? 0,
    attempts: op.attempts,
    error: op.error,
  });
  const tail = JSON.stringify({
    createdAt: op.createdAt,
    startedAt: op.startedAt,
    finishedAt: op.finishedAt,
    replica: op.owner,
  });
  return `${head.slice(0, -1)},"params":${op.paramsJson},${tail.slice(1)}`;
}

/**
 * The polled answers' tags and encodings, a few rollouts' worth: an operation is read again at
 * every request, but a client polling a 40 KB rollout gets the gzip made for the last poll while
 * nothing changed (the cursor moves once a batch), and a 304 to its If-None-Match.
 */
const POLLED_ANSWER_BYTES = 8 * 1024 * 1024;

export const operationRoutes: FastifyPluginAsyncTypebox = async (app) => {
  // Only computed(): no stamp is ever trusted, so no age either.
  const polled = new SnapshotCache({ maxBytes: POLLED_ANSWER_BYTES, maxAgeMs: 0 });
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
    async (request, reply) => {
      const { target, state, limit } = request.query;
      const listed = await listOperations(app.keelson.db, request.params.project_uuid, {
        ...(target ? { targetId: target } : {}),
        ...(state ? { state } : {}),
        limit,
      });
      const key = JSON.stringify(["list", request.params.project_uuid, target, state, limit]);
      return sendCachedJson(request, reply, polled.computed(key, `[${listed.map(operationJson).join(",")}]`));
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
    async (request, reply) => {
      const op = await operationById(app.keelson.db, request.params.uuid);
      if (!op || !canSeeProject(callerOf(request), op.projectId)) throw notFound("operation", request.params.uuid);
      return sendCachedJson(request, reply, polled.computed(JSON.stringify(["one", op.id]), operationJson(op)));
    },
  );
};
