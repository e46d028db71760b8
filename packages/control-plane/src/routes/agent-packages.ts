import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AGENT_VERSION_PATTERN } from "@keelson/protocol";
import { Type } from "typebox";
import { agentShelf } from "../domain/packages/agent-shelf.ts";
import { registerPackageRoutes } from "./package-routes.ts";

/** Agent packages stored in the control plane's data dir and served to agents (docs/agent-package.md). */
export const agentPackageRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const shelf = agentShelf(app.keelson);
  await registerPackageRoutes(app, () => shelf, {
    tags: ["agent packages"],
    noun: "agent package",
    uploadNote: "Hosts install it through `POST /v4/{project}/hostAgentUpgrades`.",
    versionParam: Type.String({ pattern: AGENT_VERSION_PATTERN }),
  });
};
