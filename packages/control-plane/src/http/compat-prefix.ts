import type { RawRequestDefaultExpression } from "fastify";

/**
 * Existing clients reach the API under `/qbert/...` and the host records under
 * `/resmgr/v1/hosts...`. Rewriting before routing makes those paths identical to the
 * unprefixed ones by construction, rather than by registering every route twice.
 */
export function stripCompatPrefix(req: RawRequestDefaultExpression): string {
  const url = req.url ?? "/";
  if (url === "/qbert" || url.startsWith("/qbert/") || url.startsWith("/qbert?")) {
    // `/qbert?x` keeps its query on the root path, rather than becoming the path-less `?x`.
    const rest = url.slice("/qbert".length);
    return rest.startsWith("/") ? rest : `/${rest}`;
  }
  if (url.startsWith("/resmgr/v1/hosts")) return url.slice("/resmgr".length);
  return url;
}
