import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AGENT_LINK_PATH } from "@keelson/protocol";
import { Type } from "typebox";
import { pingAll } from "../agents/ping-all.ts";
import { registerHost } from "../domain/hosts/registration.ts";
import { ErrorBody, GLOBAL_ADMIN, PUBLIC } from "./common-schemas.ts";

/**
 * Host registration (DESIGN.md "Identity"): an agent trades a one-time join token for a host
 * id and a host credential, then authenticates its link with that credential only.
 */

const HOSTNAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$";

const RegisterBody = Type.Object(
  {
    joinToken: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: "One-time token from `POST /v1/projects/{projectId}/joinTokens`",
    }),
    hostname: Type.String({ pattern: HOSTNAME_PATTERN, description: "The host's name; becomes the node name" }),
    primaryIp: Type.Optional(
      Type.String({
        pattern: "^[0-9A-Fa-f:.]{0,64}$",
        description: "IPv4 or IPv6 address; updated by the agent's reports",
      }),
    ),
    agentVersion: Type.Optional(Type.String({ maxLength: 128 })),
    cloudInstanceId: Type.Optional(
      Type.String({
        pattern: "^[A-Za-z0-9._:-]{1,128}$",
        description:
          "The cloud's id of this machine (EC2: the instance metadata's instance-id). Required with a cluster's " +
          "join token (an auto deploy's instances); the node's v3 `cloudInstanceId`.",
      }),
    ),
    credential: Type.Optional(
      Type.String({
        pattern: "^khc_[A-Za-z0-9_-]{43,128}$",
        description:
          "A host credential the agent made (`khc_` + at least 256 random bits, base64url). With it the " +
          "registration can be repeated: the same join token and credential again answer the same host " +
          "(its answer was lost). Without it the control plane makes one.",
      }),
    ),
  },
  { additionalProperties: false },
);

const Registered = Type.Object({
  hostId: Type.String({ description: "The node uuid of this host" }),
  credential: Type.String({
    description: `Host credential for the agent link (\`Authorization: Bearer ...\` on ${AGENT_LINK_PATH}). Shown only in this response.`,
  }),
  projectId: Type.String(),
});

const PingBody = Type.Object(
  {
    projectId: Type.Optional(Type.String({ description: "Only the hosts of this project; default every host" })),
    timeoutMs: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 60_000, default: 10_000, description: "Per-host timeout of the ping" }),
    ),
  },
  { additionalProperties: false },
);

const Millis = Type.Number({ description: "milliseconds" });
const PingReport = Type.Object({
  hosts: Type.Integer({ description: "Hosts with a live link that were pinged" }),
  ok: Type.Integer(),
  failed: Type.Integer({ description: "The agent answered with an error" }),
  timedOut: Type.Integer(),
  offline: Type.Integer({ description: "The link dropped before the ping could be sent" }),
  totalMs: Type.Number({ description: "From the first ping sent to the last answer" }),
  latencyMs: Type.Union([
    Type.Object({ min: Millis, p50: Millis, p95: Millis, p99: Millis, max: Millis }),
    Type.Null(),
  ]),
});

export const agentRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { db, agents } = app.keelson;

  app.post(
    "/v1/agents/register",
    {
      config: { ...PUBLIC, issues: "host credential" },
      schema: {
        tags: ["agents"],
        summary: "Register a host (extension, join token)",
        description:
          "Spends a one-time join token and creates the host's node in the project's local node pool " +
          "(unattached). An unknown, used or expired join token answers 403 with code " +
          "`join_token_unknown`, `join_token_used` or `join_token_expired`; a used one with the `credential` " +
          "of the host that used it answers that host again (a retry after a lost answer).",
        security: [],
        body: RegisterBody,
        response: { 201: Registered, 400: ErrorBody, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (request, reply) => reply.status(201).send(await registerHost(db, request.body)),
  );

  app.post(
    "/v1/agents/ping",
    {
      config: GLOBAL_ADMIN,
      // An empty POST means "every host, default timeout".
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags: ["agents"],
        summary: "Ping every connected agent (extension, global admin)",
        description:
          "Sends the `ping` command over the agent link to every host with a live link (or those of " +
          "`projectId`) at once and reports how many answered and the round-trip times.",
        body: PingBody,
        response: { 200: PingReport, 400: ErrorBody, 403: ErrorBody },
      },
    },
    async (request) =>
      pingAll(agents, { projectId: request.body.projectId, timeoutMs: request.body.timeoutMs ?? 10_000 }),
  );
};
