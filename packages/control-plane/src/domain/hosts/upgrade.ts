import type { CommandResult } from "@keelson/protocol";
import type { Keelson } from "../../context.ts";
import { badRequest, conflict } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";
import { findHost } from "./hosts.ts";

export interface AgentUpgradeRequest {
  name: string;
  version: string;
  url: string;
  sha256?: string;
}

/** The agent acknowledges at once; the upgrade itself shows later in the host's status. */
const ACK_TIMEOUT_MS = 15_000;

/**
 * `PUT /v1/hosts/{uuid}/hostagent`: relays the upgrade to the host's agent over its link.
 * The agent validates again and answers quickly (status `updating`); its progress and any
 * failure arrive as status frames and show in the host record. No link: 409, nothing queued,
 * because a host that comes back hours later should not upgrade itself unasked.
 */
export async function relayAgentUpgrade(
  keelson: Pick<Keelson, "db" | "agents">,
  identity: Identity,
  hostId: string,
  request: AgentUpgradeRequest,
): Promise<CommandResult<"agent.upgrade">> {
  const host = await findHost(keelson.db, identity, hostId);
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw badRequest("url", "url must be an absolute http, https or file URL");
  }
  if (!["http:", "https:", "file:"].includes(url.protocol)) {
    throw badRequest("url", `url scheme ${url.protocol} is not supported (http, https or file)`);
  }
  if (!keelson.agents.isConnected(host.id)) {
    throw conflict(
      `host ${host.id} is offline: its agent is not connected, so it cannot be upgraded now`,
      "host_offline",
    );
  }
  if (host.agentStatus === "updating") {
    throw conflict(`host ${host.id} is already upgrading its agent`, "upgrade_in_progress");
  }
  const payload = {
    name: request.name,
    version: request.version,
    url: request.url,
    ...(request.sha256 ? { sha256: request.sha256.toLowerCase() } : {}),
  };
  return keelson.agents.sendCommand(host.id, "agent.upgrade", payload, { timeoutMs: ACK_TIMEOUT_MS });
}
