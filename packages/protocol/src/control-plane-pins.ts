import { isIP } from "node:net";
import { type Static, Type } from "typebox";

/**
 * Control-plane pins (issue 11; spec §4.9 step 4, "change the deployment-unit name-to-IP
 * mapping"): the address an agent connects to for a host name of its KEELSON_CONTROL_PLANE,
 * instead of what DNS answers. TLS still verifies the certificate against the name. The rules
 * here are the one home of what a pin is, for the agent's setting, the command, the control
 * plane's route and the CLI's config.
 */

/** More would be a mistake: KEELSON_CONTROL_PLANE names a handful of replicas at most. */
export const MAX_CONTROL_PLANE_PINS = 16;

/**
 * How long the agent waits for one new address to answer /readyz; the control plane gives
 * control-plane.pins this per entry, and a little more, before it gives up on the answer.
 */
export const PIN_CHECK_TIMEOUT_MS = 10_000;

/** A DNS host name (RFC 1123 labels), not an address: an address needs no pin. */
const PIN_NAME_PATTERN =
  "^(?=.{1,253}$)(?!\\d+(\\.\\d+){3}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$";
const NAME = new RegExp(PIN_NAME_PATTERN);

export const ControlPlanePin = Type.Object(
  {
    // The name's rule is checkControlPlanePins's (a pattern's refusal would quote the pattern, not the rule).
    name: Type.String({ minLength: 1, maxLength: 253, description: "A host name of KEELSON_CONTROL_PLANE" }),
    ip: Type.String({ minLength: 2, maxLength: 45, description: "The IPv4 or IPv6 address to reach it at" }),
  },
  { additionalProperties: false },
);
export type ControlPlanePin = Static<typeof ControlPlanePin>;

export const ControlPlanePins = Type.Array(ControlPlanePin, { maxItems: MAX_CONTROL_PLANE_PINS });

/** A broken pin rule: the entry (0-based) and its field it is about, when it is about one. */
export interface PinProblem {
  entry?: { index: number; field: "name" | "ip" };
  message: string;
}

/** A pin list's first broken rule; undefined when every rule holds. */
export function checkControlPlanePins(pins: readonly { name: string; ip: string }[]): PinProblem | undefined {
  if (pins.length > MAX_CONTROL_PLANE_PINS) {
    return { message: `must have at most ${MAX_CONTROL_PLANE_PINS} entries, not ${pins.length}` };
  }
  const seen = new Set<string>();
  for (const [i, pin] of pins.entries()) {
    if (!NAME.test(pin.name)) {
      const message = `${JSON.stringify(pin.name)} must be a host name (not an address)`;
      return { entry: { index: i, field: "name" }, message };
    }
    if (!isIP(pin.ip)) {
      return { entry: { index: i, field: "ip" }, message: `${JSON.stringify(pin.ip)} must be an IPv4 or IPv6 address` };
    }
    const name = pin.name.toLowerCase();
    if (seen.has(name)) return { entry: { index: i, field: "name" }, message: `${pin.name} is named twice` };
    seen.add(name);
  }
  return undefined;
}
