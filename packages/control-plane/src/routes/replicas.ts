import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { Keelson } from "../context.ts";
import { notFound } from "../http/errors.ts";
import { listReplicas, type ReplicaView } from "../replicas/registry.ts";
import { errorResponses as errors, GLOBAL_ADMIN, Timestamp } from "./common-schemas.ts";

const Replica = Type.Object({
  id: Type.String({ description: "KEELSON_REPLICA_ID" }),
  url: Type.String({ description: "Where it answers (KEELSON_PUBLIC_URL, else its listener)" }),
  version: Type.String(),
  startedAt: Timestamp,
  lastHeartbeat: Timestamp,
  live: Type.Boolean({ description: "Its heartbeat is younger than one lease (KEELSON_OPERATION_LEASE_MS)" }),
  agentsHeld: Type.Integer({ description: "Agent links it holds (as of its last heartbeat; this replica's now)" }),
  operationsOwned: Type.Integer({ description: "Unfinished operations it holds an unexpired lease on" }),
  draining: Type.Boolean({
    description:
      "Asked to drain (POST /v1/replicas/{id}/drain): it takes no operation and no agent link until it restarts",
  }),
  drainingSince: Type.Union([Timestamp, Type.Null()]),
  self: Type.Boolean({
    description: "The replica that answers this request (how the operator's tool tells its own from the others)",
  }),
});

const present = (k: Keelson) => (r: ReplicaView) => ({
  id: r.id,
  url: r.url,
  version: r.version,
  startedAt: r.startedAt,
  lastHeartbeat: r.heartbeatAt,
  live: r.live,
  agentsHeld: r.id === k.runner.replicaId ? k.agents.links.open : r.agentsHeld,
  operationsOwned: r.operationsOwned,
  draining: r.drainingSince !== null,
  drainingSince: r.drainingSince,
  self: r.id === k.runner.replicaId,
});

/** The control-plane replicas sharing this database (issue 17), for the global admin. */
export const replicaRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    "/v1/replicas",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags: ["replicas (extension)"],
        summary: "The control-plane replicas on this database, by id",
        response: { 200: Type.Array(Replica), ...errors(403) },
      },
    },
    async () => (await listReplicas(app.keelson.db, app.keelson.settings.operationLeaseMs)).map(present(app.keelson)),
  );
  app.post(
    "/v1/replicas/:id/drain",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags: ["replicas (extension)"],
        summary: "Drain a replica for maintenance: its operations handed over, its agents moved to another replica",
        description:
          "Answers 202 once the replica is marked draining (it learns at once, or at its next heartbeat); " +
          "GET /v1/replicas shows when it holds no operation and no agent link. 404: no such replica; " +
          "409 `replica_gone`: not live; 409 `last_replica`: no other live replica would take its work over. " +
          "The replica's restart ends the drain.",
        params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 253 }) }),
        response: { 202: Replica, ...errors(403, 404, 409) },
      },
    },
    async (request, reply) => {
      const k = app.keelson;
      await k.drain.request(request.params.id);
      const row = (await listReplicas(k.db, k.settings.operationLeaseMs)).find((r) => r.id === request.params.id);
      if (!row) throw notFound("replica", request.params.id);
      return reply.status(202).send(present(k)(row));
    },
  );
};
