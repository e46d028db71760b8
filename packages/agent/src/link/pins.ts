import type { LookupAddress, LookupOptions } from "node:dns";
import type { LookupFunction } from "node:net";
import { type ControlPlanePin, checkControlPlanePins } from "@keelson/protocol";
import { StateDir } from "../state-dir.ts";

/**
 * The agent's control-plane pins (issue 11): for a host name of KEELSON_CONTROL_PLANE, the
 * address every connection to the control plane goes to (the link, registration, the CA
 * bundle, package and image downloads: all of them take `lookup` from ControlPlaneTrust),
 * instead of what DNS answers. The URL keeps the name, so TLS still verifies the certificate
 * against it. The first pins come from KEELSON_CONTROL_PLANE_ADDRESSES; pins changed by the
 * control-plane.pins command are kept in the state dir and win over the setting from then on.
 */

/** In the state dir: `{ "pins": [{ "name", "ip" }] }`. */
export const PINS_FILE = "control-plane-pins.json";

export const PINS_SETTING_RULE = "`name=ip` pairs, comma-separated; each name a host name of KEELSON_CONTROL_PLANE";

/** KEELSON_CONTROL_PLANE_ADDRESSES's pairs, as written (an entry without `=` gets an empty ip). */
export function parsePinsSetting(value: string): ControlPlanePin[] {
  return value
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const at = entry.indexOf("=");
      return at < 0 ? { name: entry, ip: "" } : { name: entry.slice(0, at).trim(), ip: entry.slice(at + 1).trim() };
    });
}

/** The setting's own check: the pairs' form and the pin rules (protocol's control-plane-pins.ts). */
export function checkPinsSetting(value: string): string | undefined {
  const pins = parsePinsSetting(value);
  const missing = pins.find((p) => p.ip === "");
  if (missing) return `entry ${JSON.stringify(missing.name)} must be name=ip`;
  const problem = checkControlPlanePins(pins);
  if (!problem) return undefined;
  return problem.entry ? `entry ${problem.entry.index + 1}: ${problem.message}` : problem.message;
}

/** The host names of KEELSON_CONTROL_PLANE's URLs, lower case. */
export function controlPlaneHostNames(controlPlanes: readonly string[]): string[] {
  return controlPlanes.map((url) => new URL(url).hostname.toLowerCase());
}

/** The first pin whose name KEELSON_CONTROL_PLANE does not use, as a sentence; undefined when none. */
export function strangerPin(pins: readonly ControlPlanePin[], controlPlanes: readonly string[]): string | undefined {
  const names = controlPlaneHostNames(controlPlanes);
  const stranger = pins.find((p) => !names.includes(p.name.toLowerCase()));
  return stranger
    ? `${stranger.name} is not a host name of KEELSON_CONTROL_PLANE (${[...new Set(names)].join(", ")})`
    : undefined;
}

export class ControlPlanePins {
  private pins: Map<string, string>;

  /** The kept pins when the state dir has them, else `initial` (the setting's). */
  constructor(
    private readonly stateDir: StateDir,
    initial: readonly ControlPlanePin[] = [],
  ) {
    const kept = stateDir.readJson<{ pins?: ControlPlanePin[] }>(PINS_FILE)?.pins;
    const usable = Array.isArray(kept) && checkControlPlanePins(kept) === undefined;
    this.pins = toMap(usable ? kept : initial);
  }

  static in(stateDir: string, initial?: readonly ControlPlanePin[]): ControlPlanePins {
    return new ControlPlanePins(new StateDir(stateDir), initial);
  }

  get list(): ControlPlanePin[] {
    return [...this.pins].map(([name, ip]) => ({ name, ip }));
  }

  /** The pinned address of `host`; undefined: DNS decides. */
  addressOf(host: string): string | undefined {
    return this.pins.get(host.toLowerCase());
  }

  /** Keeps `pins` (atomically, in the state dir) and uses them from the next connection on. */
  replace(pins: readonly ControlPlanePin[]): void {
    const next = toMap(pins);
    this.stateDir.writeJson(PINS_FILE, { pins: [...next].map(([name, ip]) => ({ name, ip })) }, 0o644);
    this.pins = next;
  }

  /** The `lookup` option of a connection to `host` (net.connect's), or undefined when it is not pinned. */
  lookupFor(host: string): LookupFunction | undefined {
    const address = this.addressOf(host);
    return address === undefined ? undefined : lookupAt(address);
  }
}

/** A `lookup` that answers `address` for any name (net.connect asks with `all` under autoSelectFamily). */
export function lookupAt(address: string): LookupFunction {
  const family = address.includes(":") ? 6 : 4;
  return (_host: string, options: LookupOptions, callback: (...args: never[]) => void) => {
    const answer = callback as unknown as (err: null, address: string | LookupAddress[], family?: number) => void;
    if (options?.all) answer(null, [{ address, family }]);
    else answer(null, address, family);
  };
}

function toMap(pins: readonly ControlPlanePin[]): Map<string, string> {
  return new Map(pins.map((p) => [p.name.toLowerCase(), p.ip]));
}
