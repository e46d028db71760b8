import type { FastifyReply } from "fastify";

/** The spec's "200 no body": an empty response, not the JSON text `null`. */
export function sendNoBody(reply: FastifyReply) {
  return reply.code(200).send(undefined as never);
}
