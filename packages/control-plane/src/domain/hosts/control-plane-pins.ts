import {
  AGENT_CAPABILITIES,
  type CommandResult,
  type ControlPlanePin,
  checkControlPlanePins,
  PIN_CHECK_TIMEOUT_MS,
} from "@keelson/protocol";
import type { Keelson } from "../../context.ts";
import { badRequest } from "../../http/errors.ts";
import type { Identity } from "../identity/resolver.ts";
import { linkedHost } from "./linked-host.ts";

/**
 * `PUT /v4/{project}/hosts/{uuid}/controlPlanePins` (issue 11, spec §4.9 step 4: the deployment
 * unit's name-to-IP mapping): asks the host's agent to reach the control plane's names at these
 * addresses (control-plane.pins). The agent checks each address answers as the control plane
 * before it keeps any; its refusal comes back as 502 naming the name and address.
 */
export async function setControlPlanePins(
  k: Pick<Keelson, "db" | "agents">,
  identity: Identity,
  projectId: string,
  hostId: string,
  pins: ControlPlanePin[],
): Promise<CommandResult<"control-plane.pins">> {
  const problem = checkControlPlanePins(pins);
  if (problem) {
    // Named as the schema's refusals name a field (pins.0.ip).
    const field = problem.entry ? `pins.${problem.entry.index}.${problem.entry.field}` : "pins";
    throw badRequest(field, `${field}: ${problem.message}`);
  }
  const capability = AGENT_CAPABILITIES.controlPlanePins;
  const host = await linkedHost(k, identity, hostId, capability, "to take control-plane pins", projectId);
  return k.agents.sendCommand(
    host.id,
    "control-plane.pins",
    { pins },
    { timeoutMs: (pins.length + 1) * PIN_CHECK_TIMEOUT_MS },
  );
}
