import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ClientFrame, MAX_CLIENT_FRAME_BYTES, ServerFrame, WEBCLI_PATH } from "../webcli/frames.ts";
import { EmptyReply, ErrorBody, PUBLIC } from "./common-schemas.ts";

/**
 * `GET /v1/webcli/session` in the OpenAPI document. The WebSocket itself is served by
 * webcli/server.ts on the HTTP server's `upgrade` event, which Node gives every request that
 * asks to upgrade, so this route sees only requests that did not: it answers them 426, as
 * RFC 9110 §15.5.22 says, naming the protocol to ask for. OpenAPI has no WebSocket operation,
 * so the frames are in the `x-keelson-websocket` extension (the schemas both sides check).
 * Public: the credential is the web CLI token in the first frame, not an X-Auth-Token.
 */
export const webcliSessionRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    WEBCLI_PATH,
    {
      config: PUBLIC,
      schema: {
        tags: ["kubeconfig"],
        summary: "The web CLI terminal: a WebSocket opened with a web CLI token (extension)",
        description:
          "Open with a WebSocket upgrade (`Connection: Upgrade`, `Upgrade: websocket`). The first frame is " +
          '`{"type":"auth","token":"…"}` with a token from `POST /v4/{project_uuid}/webcli/{uuid}`, within 10 s; ' +
          "it opens one session, on any replica. Then `input` (one command line) and `resize` frames; the " +
          "server sends `ready`, `output`, `exit` after each line, and `error` before it closes. Every frame " +
          "is one JSON text message, checked against `x-keelson-websocket` both ways. What a session may run " +
          "is in the README's Web CLI section. A request without the upgrade: 426.",
        querystring: Type.Object({
          cluster: Type.Optional(Type.String({ description: "When given, it must be the token's cluster" })),
        }),
        response: {
          101: { ...EmptyReply, description: "Switching Protocols: the WebSocket of the session" },
          426: { ...ErrorBody, description: "Not a WebSocket upgrade (`upgrade_required`)" },
        },
        "x-keelson-websocket": {
          subprotocol: null,
          maxClientFrameBytes: MAX_CLIENT_FRAME_BYTES,
          clientFrames: ClientFrame,
          serverFrames: ServerFrame,
        },
      } as Record<string, unknown>,
    },
    async (_request, reply) =>
      reply
        .code(426)
        .header("upgrade", "websocket")
        .header("connection", "Upgrade")
        .send({ code: "upgrade_required", message: `${WEBCLI_PATH} is a WebSocket: open it with an upgrade` }),
  );
};
