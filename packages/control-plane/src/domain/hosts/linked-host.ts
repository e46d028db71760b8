import type { Keelson } from "../../context.ts";
import { conflict, notFound } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";
import { findHost } from "./hosts.ts";

/**
 * The host, linked now by an agent that declared `capability` (AGENT_CAPABILITIES); 409
 * otherwise, saying what the agent is too old for (`what`: "to stage images"). With
 * `projectId` (a /v4/{project}/ path), a host of another project is not found.
 */
export async function linkedHost(
  k: Pick<Keelson, "db" | "agents">,
  identity: Identity,
  hostId: string,
  capability: string,
  what: string,
  projectId?: string,
) {
  const host = await findHost(k.db, identity, hostId);
  if (projectId !== undefined && host.projectId !== projectId) throw notFound("host", hostId);
  if (!k.agents.isConnected(host.id)) {
    throw conflict(`host ${host.id} is offline: its agent is not connected`, "host_offline");
  }
  if (k.agents.supports(host.id, capability) === false) {
    throw conflict(
      `host ${host.id} runs an agent too old ${what}; upgrade its agent first (POST /v4/{project}/hostAgentUpgrades)`,
      "agent_too_old",
    );
  }
  return host;
}
