import type { ServerResponse } from "node:http";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ProjectEventFanout } from "../domain/events/project-events.ts";
import { ErrorBody, READER } from "./common-schemas.ts";

/** A comment line this often keeps proxies and clients from timing an idle stream out. */
const HEARTBEAT_MS = 15_000;

/**
 * `GET /v4/{project_uuid}/events` (extension): server-sent events of the project's operations
 * (`operation.started`, `operation.step` — a step done, or a rollout batch started or done —, `operation.finished`)
 * and nodes (`node.report`, `node.connected`, `node.disconnected`, `node.agent`), each with a
 * JSON `data:` line, so a client shows progress without polling. Authenticated like every
 * route, with the X-Auth-Token header. No replay: a client that reconnects reads current state
 * from the REST resources, then follows the stream. A stream whose client stops reading is
 * ended once KEELSON_EVENT_STREAM_BUFFER_BYTES wait unsent.
 */
export const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const open = new Set<ServerResponse>();
  // One follower of the runner and the hub for every stream: each event is encoded once.
  const fanout = new ProjectEventFanout(k.runner.events, k.agents.nodeEvents.all);
  const bufferLimit = k.settings.eventStreamBufferBytes;

  // An open stream would hold app.close() until the client leaves; end them all first.
  app.addHook("preClose", async () => {
    for (const res of open) res.end();
  });

  app.get(
    "/v4/:project_uuid/events",
    {
      config: READER,
      schema: {
        tags: ["events"],
        summary: "Live operation and node changes of the project, as server-sent events (extension)",
        params: Type.Object({ project_uuid: Type.String() }),
        produces: ["text/event-stream"],
        response: { 200: Type.String({ description: "text/event-stream" }), 403: ErrorBody },
      },
    },
    async (request, reply) => {
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      // A client that stops reading would make every event wait here without end: past the
      // limit (response and socket buffers together) the stream is ended and the client
      // reconnects, reading current state from the resources as after any drop.
      const send = (text: string) => {
        if (res.destroyed) return;
        res.write(text);
        if (res.writableLength > bufferLimit) {
          k.metrics.eventStreamsEnded.inc();
          res.destroy();
        }
      };
      send(": keelson events\n\n");
      let seq = 0;
      const stop = fanout.follow(request.params.project_uuid, (block) => {
        seq++;
        send(`id: ${seq}\n${block}`);
      });
      const heartbeat = setInterval(() => send(": heartbeat\n\n"), HEARTBEAT_MS);
      heartbeat.unref();
      open.add(res);
      const cleanup = () => {
        stop();
        clearInterval(heartbeat);
        open.delete(res);
      };
      res.on("close", cleanup);
      request.raw.on("close", cleanup);
    },
  );
};
