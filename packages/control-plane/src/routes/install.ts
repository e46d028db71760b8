import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AGENT_VERSION_PATTERN } from "@keelson/protocol";
import { Type } from "typebox";
import { agentInstallScript, packageToInstall } from "../domain/install/agent-install.ts";
import { agentShelf } from "../domain/packages/agent-shelf.ts";
import { baseUrlOf } from "../http/base-url.ts";
import { ErrorBody, PUBLIC } from "./common-schemas.ts";

/**
 * The agent install script (README, "Adding a host"). Public like the package downloads it
 * points to: it holds this control plane's URL and a package's version and sha256, never a
 * credential; the join token and the CA pin come from the person who runs it (the join token's
 * `installCommand`).
 */
export const installRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const shelf = agentShelf(k);
  app.get(
    "/v1/install/agent.sh",
    {
      config: PUBLIC,
      schema: {
        tags: ["hosts"],
        summary: "The script that installs the host agent (extension)",
        description:
          "A POSIX sh script that checks the host (Linux, x86_64 or aarch64, Node.js 20 or newer, systemd), pins the " +
          "control plane's CA by `--ca-hash` (every download verified against it; plain HTTP only to a loopback " +
          "control plane), installs the agent package under /opt/keelson/agent, writes /etc/keelson/agent.env " +
          "(0600) and starts keelson-agent.service, or the launcher without systemd. Safe to run twice. Run it " +
          "through a join token's `installCommand`. 404 when no agent package is stored (or not `version`).",
        querystring: Type.Object(
          {
            version: Type.Optional(
              Type.String({ pattern: AGENT_VERSION_PATTERN, description: "Default: the package stored last" }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.String({ description: "text/x-shellscript" }), 400: ErrorBody, 404: ErrorBody },
      },
    },
    async (request, reply) => {
      const pkg = await packageToInstall(shelf, request.query.version);
      const script = agentInstallScript(baseUrlOf(k.settings.publicUrl, request), pkg);
      return reply.type("text/x-shellscript; charset=utf-8").header("cache-control", "no-store").send(script);
    },
  );
};
