import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
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
    async () => {
      const { db, settings, runner, agents } = app.keelson;
      const present = (r: ReplicaView) => ({
        id: r.id,
        url: r.url,
        version: r.version,
        startedAt: r.startedAt,
        lastHeartbeat: r.heartbeatAt,
        live: r.live,
        agentsHeld: r.id === runner.replicaId ? agents.links.open : r.agentsHeld,
        operationsOwned: r.operationsOwned,
      });
      return (await listReplicas(db, settings.operationLeaseMs)).map(present);
    },
  );
};
