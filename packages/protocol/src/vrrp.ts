/**
 * keepalived's virtual router id, in the one place both sides read it. The API hands out
 * `masterVipVrouterId` from 0 to 254 (spec §8); VRRP (RFC 5798) and keepalived take 1 to 255
 * (keepalived 2.2.7: "VRID '0' not valid - must be between 1 & 255"). The control plane chooses
 * API values from this range and the agent writes `vrrpRouterId(apiValue)` into keepalived.conf,
 * so every value the API can show is one keepalived accepts.
 */

export const VROUTER_ID_MIN = 0;
export const VROUTER_ID_MAX = 254;

/** The API's `masterVipVrouterId` as a number, or undefined when it is not an integer in 0–254. */
export function parseVrouterId(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0|[1-9]\d{0,2})$/.test(text)) return undefined;
  const id = Number(text);
  return id >= VROUTER_ID_MIN && id <= VROUTER_ID_MAX ? id : undefined;
}

/** The VRRP virtual router id (1–255) keepalived is given for an API value (0–254). */
export function vrrpRouterId(apiValue: number): number {
  if (!Number.isInteger(apiValue) || apiValue < VROUTER_ID_MIN || apiValue > VROUTER_ID_MAX) {
    throw new RangeError(`virtual router id ${apiValue} is outside ${VROUTER_ID_MIN}-${VROUTER_ID_MAX}`);
  }
  return apiValue + 1;
}
