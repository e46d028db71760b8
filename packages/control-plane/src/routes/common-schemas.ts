import { Type } from "typebox";

export const ErrorBody = Type.Object(
  {
    code: Type.String({ description: "Stable machine-readable error code" }),
    message: Type.String({ description: "What went wrong, naming the field and the rule for bad input" }),
    field: Type.Optional(Type.String({ description: "The offending field, for 400s about one field" })),
  },
  { description: "Error" },
);

/** A 200 answer without a body, as the spec describes most writes. */
export const NoBody = Type.Null({ description: "No body" });

/** Response schemas for the error statuses a route can answer, e.g. `errorResponses(400, 403, 404)`. */
export const errorResponses = (...codes: number[]) => Object.fromEntries(codes.map((code) => [code, ErrorBody]));
