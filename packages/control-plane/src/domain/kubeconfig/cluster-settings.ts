import { SPEC_DEFAULTS } from "../clusters/spec/fields.ts";

/**
 * The few spec values the kubeconfig needs, read defensively: the spec JSON is validated on
 * write, but rows written by older versions may lack a key, so each falls back to its §8
 * default (the spec's own defaults, SPEC_DEFAULTS).
 */
const DEFAULT_API_PORT = SPEC_DEFAULTS.k8sApiPort;
const DEFAULT_CERT_EXPIRY_HOURS = SPEC_DEFAULTS.certExpiryHrs;

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

export function externalDnsName(spec: Record<string, unknown>): string | undefined {
  return nonEmptyString(spec.externalDnsName);
}

export function masterVipIpv4(spec: Record<string, unknown>): string | undefined {
  return nonEmptyString(spec.masterVipIpv4);
}

/** k8sApiPort is a string in the spec; clients also send numbers. */
export function apiPort(spec: Record<string, unknown>): string {
  const raw = spec.k8sApiPort;
  const text = typeof raw === "number" ? String(raw) : nonEmptyString(raw);
  if (text === undefined || !/^\d{1,5}$/.test(text)) return DEFAULT_API_PORT;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? String(port) : DEFAULT_API_PORT;
}

export function certExpiryHours(spec: Record<string, unknown>): number {
  const raw = spec.certExpiryHrs;
  const hours = typeof raw === "string" ? Number(raw) : raw;
  return typeof hours === "number" && Number.isFinite(hours) && hours > 0 ? hours : DEFAULT_CERT_EXPIRY_HOURS;
}
