import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AGENT_VERSION_PATTERN, ControlPlanePins, ControlPlanePinsResult } from "@keelson/protocol";
import { Type } from "typebox";
import {
  planHostAgentUpgrade,
  requestHostAgentUpgrade,
  requirePackage,
} from "../domain/hosts/agent-upgrade-request.ts";
import { setControlPlanePins } from "../domain/hosts/control-plane-pins.ts";
import { callerOf } from "../http/auth.ts";
import { baseUrlOf } from "../http/base-url.ts";
import { AGENT_RELAY_ERRORS, ErrorBody, GLOBAL_ADMIN, HostParams, MEMBER } from "./common-schemas.ts";

const Body = Type.Object(
  {
    version: Type.String({
      pattern: AGENT_VERSION_PATTERN,
      description: "Agent version to install; must be stored on this control plane (POST /v1/agentPackages)",
    }),
    hosts: Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
      minItems: 1,
      maxItems: 10_000,
      description: "Host (node) uuids of the project, upgraded in this order",
    }),
    batchSize: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        description: "Hosts upgraded at once (default 1); masters of one cluster are never in the same batch",
      }),
    ),
  },
  { additionalProperties: false },
);

const Batches = Type.Array(Type.Array(Type.String()), { description: "The hosts of each batch, in order" });

/** Host-agent upgrades as an operation (extension), their plan before they start, and the agents' control-plane pins. */
export const hostUpgradeRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  app.post(
    "/v4/:project_uuid/hostAgentUpgrades/plan",
    {
      config: MEMBER,
      schema: {
        tags: ["hosts"],
        summary: "The batches a host-agent upgrade would run in, recording nothing (extension)",
        description:
          "Takes the body of `POST /v4/{project}/hostAgentUpgrades` and makes the same checks (400: unknown " +
          "version; 404: a host not in the project; 409: a host offline, a rollout already running, a cluster of " +
          "these hosts busy), then answers the batches it would run in. Nothing is recorded or sent; the console " +
          "shows this plan before the operator confirms.",
        params: Type.Object({ project_uuid: Type.String() }),
        body: Body,
        response: {
          200: Type.Object({ batches: Batches }),
          400: ErrorBody,
          403: ErrorBody,
          404: ErrorBody,
          409: ErrorBody,
        },
      },
    },
    async (request) => {
      await requirePackage(k, request.body.version);
      return planHostAgentUpgrade(k, request.params.project_uuid, request.body);
    },
  );
  app.post(
    "/v4/:project_uuid/hostAgentUpgrades",
    {
      config: MEMBER,
      schema: {
        tags: ["hosts"],
        summary: "Upgrade the agents of the given hosts, batch by batch (extension)",
        description:
          "Records a `hosts.upgrade` operation: each batch's agents get the control-plane-served package; the next " +
          "batch starts when every host of this one is back `running` at the new version (timeout " +
          "KEELSON_HOST_UPGRADE_TIMEOUT_MS, default 10 min). A host that fails stops the rollout; the operation's " +
          "error names it. 400: unknown version; 404: a host not in the project; 409: a host offline, or a rollout " +
          "already running.",
        params: Type.Object({ project_uuid: Type.String() }),
        body: Body,
        response: {
          200: Type.Object({
            operationId: Type.String(),
            batches: Batches,
          }),
          400: ErrorBody,
          403: ErrorBody,
          404: ErrorBody,
          409: ErrorBody,
        },
      },
    },
    async (request) => {
      const pkg = await requirePackage(k, request.body.version);
      return requestHostAgentUpgrade(
        k,
        request.params.project_uuid,
        request.body,
        baseUrlOf(k.settings.publicUrl, request),
        pkg,
      );
    },
  );
  app.put(
    "/v4/:project_uuid/hosts/:uuid/controlPlanePins",
    {
      config: GLOBAL_ADMIN,
      schema: {
        tags: ["hosts"],
        summary: "Set the addresses the host's agent reaches the control plane's names at (extension)",
        description:
          "Spec §4.9 step 4 (configure-hosts changes the deployment unit's name-to-IP mapping): the agent connects to " +
          "`ip` for every URL of KEELSON_CONTROL_PLANE with host `name` (the link, registration, downloads), TLS still " +
          "verified against the name. The list replaces the agent's pins (empty: none, DNS decides). Before keeping " +
          "them the agent checks that each address answers GET /readyz as the control plane; when one does not, the " +
          "pins stay as they were and the answer is 502 naming the name, address and what happened. On success the " +
          "agent links again over the new pins at once. 400: a name that is not a host name or named twice, an ip " +
          "that is not an address, more than 16 entries; 409: the agent is offline or too old.",
        params: Type.Object({ project_uuid: Type.String(), uuid: HostParams.properties.uuid }),
        body: Type.Object({ pins: ControlPlanePins }, { additionalProperties: false }),
        response: { 200: ControlPlanePinsResult, ...AGENT_RELAY_ERRORS },
      },
    },
    async (request) =>
      setControlPlanePins(k, callerOf(request), request.params.project_uuid, request.params.uuid, request.body.pins),
  );
};
