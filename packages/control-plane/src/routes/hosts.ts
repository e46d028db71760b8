import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { AgentUpgradeRequest, AgentUpgradeResult, HostRecord } from "@keelson/protocol";
import { Type } from "typebox";
import { findHost, hostRecordOf, listHosts, listHostsPage } from "../domain/hosts/hosts.ts";
import { relayAgentUpgrade } from "../domain/hosts/upgrade.ts";
import { callerOf } from "../http/auth.ts";
import { sendTaggedJson } from "../http/json-answer.ts";
import { PAGING_EXTENSION, PageQuery, pageRequest } from "../http/paging.ts";
import { AGENT_RELAY_ERRORS, ErrorBody, HostParams, MEMBER, READER } from "./common-schemas.ts";

/**
 * The host resource (spec §4.9's host record, for every host of the caller's project; the
 * admin sees all). `/resmgr/v1/hosts...` reaches these routes through the compat rewrite.
 */
export const hostRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const k = app.keelson;
  const tags = ["hosts"];

  app.get(
    "/v1/hosts",
    {
      config: READER,
      schema: {
        tags,
        summary: "Host records of the caller's project (every project for the admin)",
        querystring: PageQuery,
        response: { 200: Type.Array(HostRecord), 400: ErrorBody, 403: ErrorBody },
        ...PAGING_EXTENSION,
      },
    },
    async (request, reply) => {
      const page = pageRequest(request.query);
      if (!page) return sendTaggedJson(request, reply, (await listHosts(k.db, callerOf(request))).map(hostRecordOf));
      const paged = await listHostsPage(k.db, callerOf(request), page);
      return sendTaggedJson(request, reply, paged.items.map(hostRecordOf), paged.next);
    },
  );

  app.get(
    "/v1/hosts/:uuid",
    {
      config: READER,
      schema: {
        tags,
        summary: "A host record, from the agent's last report",
        params: HostParams,
        response: { 200: HostRecord, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (request) => hostRecordOf(await findHost(k.db, callerOf(request), request.params.uuid)),
  );

  app.put(
    "/v1/hosts/:uuid/hostagent",
    {
      config: MEMBER,
      schema: {
        tags,
        summary: "Upgrade the host's agent: relayed to the agent, which answers at once and then upgrades itself",
        description:
          "The agent downloads the package, verifies its sha256, installs it beside the running version, restarts " +
          "on it and reports `running` with the new version; on any failure it keeps running the old version and the " +
          "host record's `message` says why. 409 when the host's agent is not connected or already upgrading.",
        params: HostParams,
        body: AgentUpgradeRequest,
        response: { 200: AgentUpgradeResult, ...AGENT_RELAY_ERRORS },
      },
    },
    async (request) => relayAgentUpgrade(k, callerOf(request), request.params.uuid, request.body),
  );
};
