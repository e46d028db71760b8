import {
  type CommandPayload,
  type CommandResult,
  type ControlPlanePin,
  checkControlPlanePins,
  PIN_CHECK_TIMEOUT_MS,
} from "@keelson/protocol";
import { type ControlPlanePins, controlPlaneHostNames, strangerPin } from "./pins.ts";
import type { ControlPlaneTrust } from "./trust.ts";

/**
 * Whether the control plane answers at `address` for `url` (a KEELSON_CONTROL_PLANE URL): GET
 * its /readyz connecting to that address, TLS verified against the URL's name with the agent's
 * trust, and the answer must be a ready Keelson control plane's (200 with its `agentLinks`).
 * Undefined when it does; else what happened, as a sentence.
 */
export async function checkAddress(
  trust: ControlPlaneTrust,
  url: string,
  address: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const timeout = AbortSignal.timeout(PIN_CHECK_TIMEOUT_MS);
  try {
    const response = await trust.fetchAt(`${url}/readyz`, address, {
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = (await response.text()).slice(0, 2048);
    if (response.status !== 200) return `GET /readyz answered HTTP ${response.status} ${text.trim()}`.trim();
    const body = parseJson(text) as { agentLinks?: unknown } | undefined;
    if (typeof body?.agentLinks !== "object" || body.agentLinks === null) {
      return "GET /readyz answered 200 but not as a Keelson control plane (no agentLinks)";
    }
    return undefined;
  } catch (err) {
    if (timeout.aborted && !signal?.aborted) return `GET /readyz had no answer within ${PIN_CHECK_TIMEOUT_MS} ms`;
    if (signal?.aborted) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const message = (err as Error).message;
    return `GET /readyz failed: ${code && !message.includes(code) ? `${code}: ` : ""}${message}`;
  }
}

/**
 * control-plane.pins: checks the new pins' rules and every new address (checkAddress), and only
 * when all of them answer keeps them; otherwise throws, naming each name and address that did
 * not answer and why, and the old pins stay.
 */
export async function changePins(
  pins: ControlPlanePins,
  trust: ControlPlaneTrust,
  controlPlanes: readonly string[],
  payload: CommandPayload<"control-plane.pins">,
  signal?: AbortSignal,
): Promise<CommandResult<"control-plane.pins">> {
  const next = payload.pins;
  const rule = checkControlPlanePins(next);
  if (rule) throw new Error(`pins: ${rule.entry ? `entry ${rule.entry.index + 1}: ` : ""}${rule.message}`);
  const stranger = strangerPin(next, controlPlanes);
  if (stranger) throw new Error(stranger);
  const problems: string[] = [];
  for (const pin of next) {
    const url = urlOf(pin, controlPlanes);
    const problem = await checkAddress(trust, url, pin.ip, signal);
    if (problem) problems.push(`${pin.name} at ${pin.ip} (${url}): ${problem}`);
  }
  if (problems.length > 0) {
    throw new Error(`pins unchanged, the control plane does not answer: ${problems.join("; ")}`);
  }
  const previous = pins.list;
  pins.replace(next);
  trust.renewConnections();
  return { pins: pins.list, previous };
}

/** The first KEELSON_CONTROL_PLANE URL with the pin's name (strangerPin made sure there is one). */
function urlOf(pin: ControlPlanePin, controlPlanes: readonly string[]): string {
  return controlPlanes[controlPlaneHostNames(controlPlanes).indexOf(pin.name.toLowerCase())] as string;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
