import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { ApiError } from "../http/errors.ts";
import { PUBLIC } from "./common-schemas.ts";

/** Where `pnpm --filter @keelson/console build` (run by scripts/ensure-deps.sh) writes the console. */
export const CONSOLE_DIST = fileURLToPath(new URL("../../../console/dist", import.meta.url));

/** A year: Vite names every asset after its content hash, so a changed asset is a new URL. */
const ASSET_MAX_AGE_MS = 365 * 24 * 3_600_000;

/**
 * The web console at /ui/ (packages/console): static files only, served without a token — every
 * API call the page makes carries the user's own. Hashed assets are cached for a year, index.html
 * never (so a new release is picked up on the next load). The page routes by the URL's hash, so
 * the server only ever serves index.html and files under assets/.
 */
export const consoleRoutes: FastifyPluginAsyncTypebox = async (app, options: { dist?: string }) => {
  const dist = options.dist ?? CONSOLE_DIST;
  // serve: false — the plugin's own routes carry no role (http/auth.ts refuses those); ours below do.
  await app.register(fastifyStatic, { root: dist, serve: false });
  const schema = { hide: true } as const;
  const notBuilt = () =>
    new ApiError(
      404,
      "console_not_built",
      `the web console is not built (${dist}): run \`pnpm --filter @keelson/console build\``,
    );

  app.get("/", { config: PUBLIC, schema }, async (_request, reply) => reply.redirect("/ui/"));
  app.get("/ui", { config: PUBLIC, schema }, async (_request, reply) => reply.redirect("/ui/"));
  app.get("/ui/", { config: PUBLIC, schema }, async (_request, reply) => {
    if (!existsSync(resolve(dist, "index.html"))) throw notBuilt();
    return reply.sendFile("index.html", { cacheControl: false }).header("cache-control", "no-cache");
  });
  app.get(
    "/ui/assets/:file",
    {
      config: PUBLIC,
      schema: { ...schema, params: Type.Object({ file: Type.String({ pattern: "^[A-Za-z0-9._-]+$" }) }) },
    },
    async (request, reply) =>
      reply.sendFile(`assets/${request.params.file}`, { maxAge: ASSET_MAX_AGE_MS, immutable: true }),
  );
};
