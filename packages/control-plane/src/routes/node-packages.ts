import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { ROLE_VERSION_PATTERN } from "@keelson/protocol";
import { Type } from "typebox";
import { nodeShelf } from "../domain/packages/node-shelf.ts";
import { registerPackageRoutes } from "./package-routes.ts";

/**
 * Node packages, one per kube role version (docs/node-package.md): nodes that join or upgrade to
 * a role version with a stored package download it from here and run its binaries.
 */
export const nodePackageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const shelf = nodeShelf(app.keelson);
  await registerPackageRoutes(app, () => shelf, {
    tags: ["node packages"],
    noun: "node package",
    uploadNote:
      "Its manifest's `roleVersion` must be a role version of the catalogue; nodes joining or upgrading to that " +
      "version download it (`node.join`/`node.upgrade` carry its path and sha256).",
    versionParam: Type.String({ pattern: ROLE_VERSION_PATTERN, description: "Role version" }),
  });
};
