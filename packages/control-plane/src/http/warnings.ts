import type { FastifyReply } from "fastify";

/** RFC 7234 warn-code 299 ("miscellaneous persistent warning"), as Kubernetes uses for unknown fields. */
export function warnIgnoredFields(reply: FastifyReply, fields: string[]): void {
  if (fields.length === 0) return;
  reply.header(
    "warning",
    fields.map((f) => `299 keelson "field ${JSON.stringify(f).slice(1, -1)} is not accepted here and was ignored"`),
  );
}
