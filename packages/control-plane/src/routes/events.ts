import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { followFrom, lostBlock, parseLastEventId, type ReplayStart, replayStart } from "../domain/events/replay.ts";
import { ErrorBody, READER } from "./common-schemas.ts";

/** A comment line this often keeps proxies and clients from timing an idle stream out. */
const HEARTBEAT_MS = 15_000;

/**
 * `GET /v4/{project_uuid}/events` (extension): server-sent events of the project's operations
 * (`operation.started`, `operation.step` — a step done, or a rollout batch started or done —, `operation.finished`)
 * and nodes (`node.report`, `node.connected`, `node.disconnected`, `node.agent`), each with a
 * JSON `data:` line, so a client shows progress without polling. Authenticated like every
 * route, with the X-Auth-Token header. Every event carries its stored `id:`, the same on every
 * replica, and a new stream opens with the newest id (a block with only `id:`): a client that
 * reconnects, to any replica, with `Last-Event-ID` (or `?lastEventId=`) gets the project's
 * events after it from the table, then the live ones; when those are gone (past
 * KEELSON_EVENT_RETENTION_MINUTES / _ROWS, or an id this database never gave) the stream opens
 * with an `events.lost` event instead (no id) and the client reads current state from the REST
 * resources. A stream whose client stops reading is ended once
 * KEELSON_EVENT_STREAM_BUFFER_BYTES wait unsent.
 */
export const eventRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const open = k.eventStreams;
  // One follower of the runner and the hub for every stream (app.ts): each event is encoded once.
  const { projectEvents: fanout, eventLog } = k;
  const bufferLimit = k.settings.eventStreamBufferBytes;

  // An open stream would hold app.close() until the client leaves; end them all first.
  app.addHook("preClose", async () => {
    open.endAll();
  });

  app.get(
    "/v4/:project_uuid/events",
    {
      config: READER,
      schema: {
        tags: ["events"],
        summary: "Live operation and node changes of the project, as server-sent events (extension)",
        params: Type.Object({ project_uuid: Type.String() }),
        querystring: Type.Object({
          lastEventId: Type.Optional(
            Type.String({
              description: "Resume after this event id, for clients that cannot send the Last-Event-ID header",
            }),
          ),
        }),
        headers: Type.Object({
          "last-event-id": Type.Optional(
            Type.String({ description: "Resume after this event id (what an EventSource sends when it reconnects)" }),
          ),
        }),
        produces: ["text/event-stream"],
        response: { 200: Type.String({ description: "text/event-stream" }), 400: ErrorBody, 403: ErrorBody },
      },
    },
    async (request, reply) => {
      const projectId = request.params.project_uuid;
      const lastId = parseLastEventId(request.headers["last-event-id"], request.query.lastEventId);
      // Before the 200: a database that cannot answer gets the API's error, not a cut stream. A
      // new stream starts after the newest event and says so in its opening block (an `id:`
      // without data, which sets the client's Last-Event-ID): a client dropped before its first
      // event still resumes without a gap.
      const from = lastId ?? (await eventLog.bounds()).newest ?? 0;
      const start: ReplayStart = lastId === undefined ? { lost: false } : await replayStart(eventLog, lastId);
      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      // A client that stops reading would make every event wait here without end: past the
      // limit (response and socket buffers together; it holds at most the limit and one write,
      // a turn's events) the stream is ended and the client reconnects with its Last-Event-ID,
      // as after any drop. What waits is mostly the deliveries' Buffers, shared by every client.
      const send = (bytes: string | Buffer) => {
        if (res.destroyed) return;
        res.write(bytes);
        if (res.writableLength > bufferLimit) {
          k.metrics.eventStreamsEnded.inc();
          res.destroy();
        }
      };
      send(`: keelson events\n\n${lastId === undefined ? `id: ${from}\n\n` : ""}`);
      if (start.lost && lastId !== undefined) send(lostBlock(lastId, start));
      let stop: () => void = () => undefined;
      const heartbeat = setInterval(() => send(": heartbeat\n\n"), HEARTBEAT_MS);
      heartbeat.unref();
      open.add(res);
      let closed = false;
      const cleanup = () => {
        closed = true;
        stop();
        clearInterval(heartbeat);
        open.delete(res);
      };
      res.on("close", cleanup);
      request.raw.on("close", cleanup);
      try {
        stop = await followFrom(fanout, eventLog, projectId, from, start, send);
      } catch (err) {
        // The replay's read failed midway: the client reconnects with the last id it got.
        k.log.warn({ err, projectId }, "replaying stored events failed; ending the stream");
        res.destroy();
        return;
      }
      if (closed) stop();
    },
  );
};
