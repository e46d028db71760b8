/**
 * How JSON answers with an entity tag go out: 304 with no body when the client's If-None-Match
 * names the tag, else the body. A cached answer goes out in the coding the client accepts,
 * encoded once (snapshot-cache.ts), with Content-Encoding set so that the compression plugin
 * passes it through; an uncached one is compressed by the plugin as any other response.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { COMPRESS_THRESHOLD, negotiateEncoding } from "./encodings.ts";
import { etagOf, ifNoneMatchHas } from "./etag.ts";
import { linkNextPage } from "./paging.ts";
import type { CachedAnswer } from "./snapshot-cache.ts";

const JSON_TYPE = "application/json; charset=utf-8";

/** Sets the validator headers; true when the client already holds this answer. */
function notModified(request: FastifyRequest, reply: FastifyReply, etag: string): boolean {
  // Vary on every answer, plain ones too: a shared cache must not hand a plain answer to a
  // client that asked for gzip, nor the reverse.
  reply.header("etag", etag).header("vary", "accept-encoding");
  return ifNoneMatchHas(request.headers["if-none-match"], etag);
}

export async function sendCachedJson(request: FastifyRequest, reply: FastifyReply, answer: CachedAnswer) {
  linkNextPage(request, reply, answer.nextPage);
  if (notModified(request, reply, answer.etag)) return reply.code(304).send();
  reply.type(JSON_TYPE);
  const encoding = answer.body.length >= COMPRESS_THRESHOLD && negotiateEncoding(request.headers["accept-encoding"]);
  if (!encoding) return reply.send(answer.body);
  return reply.header("content-encoding", encoding).send(await answer.encoded(encoding));
}

/**
 * `value` serialised by the route's response schema, as fastify would send it, with its tag;
 * a page also with the `Link` to the next one (`nextPage`, its marker), which its tag covers.
 */
export function sendTaggedJson(request: FastifyRequest, reply: FastifyReply, value: unknown, nextPage?: string) {
  const text = reply.serialize(value) as string;
  linkNextPage(request, reply, nextPage);
  if (notModified(request, reply, etagOf(text, nextPage))) return reply.code(304).send();
  return reply.type(JSON_TYPE).send(text);
}
