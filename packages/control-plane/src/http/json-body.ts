import { malformedStringAt, mayParseMalformed } from "@keelson/protocol";
import type { FastifyInstance } from "fastify";
import { badRequest } from "./errors.ts";

/**
 * The API's JSON body parser, for every route.
 *
 * - Existing clients send `Content-Type: application/json` with an empty body on POSTs that take
 *   none (restart, webcli, deregister). That is "no body", not malformed JSON.
 * - Anything else goes through Fastify's own parser, which also guards against prototype
 *   poisoning.
 * - Every string of the body, keys included, must be well-formed Unicode. JSON may carry an
 *   unpaired surrogate (`"\ud800"`), which no certificate, file name, command line, header or
 *   log line can hold: refused here, once for every route, as a 400 naming the field, before any
 *   handler could store it.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") {
      done(null, undefined);
      return;
    }
    parseJson(request, text, (err, value) => {
      if (err) return done(err);
      const field = mayParseMalformed(text) ? malformedStringAt(value) : undefined;
      if (field !== undefined) {
        const name = field || "body";
        return done(
          badRequest(name, `${name} must be valid Unicode text (it holds an unpaired surrogate)`, "invalid_text"),
        );
      }
      done(null, value);
    });
  });
}
