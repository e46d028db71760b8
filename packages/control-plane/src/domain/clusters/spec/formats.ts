/**
 * Syntax of single cluster field values (§8 limits and the formats §2.1 implies). Every check
 * throws `badRequest(path, ...)` naming the field as the client spelled it (`etcdBackup.localPath`
 * for a nested one) and the rule that failed. Cross-field rules live in rules.ts.
 */
import { checkProxyUrl, type Ipv4Block, parseIpv4, parseIpv4Cidr } from "@keelson/protocol";
import { badRequest } from "../../../http/errors.ts";

/** Dotted-quad IPv4 without leading zeros (`010.0.0.1` is octal to some parsers: refused). */
export function isIPv4(value: string): boolean {
  return parseIpv4(value) !== undefined;
}

export function checkIPv4(value: string, path: string): void {
  if (!isIPv4(value)) throw badRequest(path, `${path} must be an IPv4 address such as 10.0.0.10 (got "${value}")`);
}

/** An IPv4 CIDR whose address is the network address of its block (see parseIpv4Cidr). */
export function parseCidr(value: string, path: string): Ipv4Block {
  const parsed = parseIpv4Cidr(value);
  if (parsed.ok) return parsed.block;
  if (parsed.problem === "syntax") {
    throw badRequest(path, `${path} must be an IPv4 CIDR such as 10.20.0.0/16 (got "${value}")`);
  }
  throw badRequest(
    path,
    `${path} has host bits set: ${value} is not the network address of its block (did you mean ${parsed.network}?)`,
  );
}

export function checkCidrSyntax(value: string, path: string): void {
  parseCidr(value, path);
}

/** MetalLB address pools: `start-end[,start-end...]`, each an IPv4 range with start <= end, not overlapping. */
export function checkMetallbCidr(value: string, path: string): void {
  const ranges: Array<{ start: number; end: number; text: string }> = [];
  for (const raw of value.split(",")) {
    const text = raw.trim();
    const m = /^([0-9.]+)\s*-\s*([0-9.]+)$/.exec(text);
    if (!m || !isIPv4(m[1] as string) || !isIPv4(m[2] as string)) {
      throw badRequest(
        path,
        `${path} must be comma-separated IPv4 ranges written start-end, such as 10.0.0.100-10.0.0.150 (bad pool "${text}")`,
      );
    }
    const start = parseIpv4(m[1] as string) as number;
    const end = parseIpv4(m[2] as string) as number;
    if (start > end) throw badRequest(path, `${path}: range ${text} ends before it starts (start must be <= end)`);
    const clash = ranges.find((r) => start <= r.end && r.start <= end);
    if (clash) throw badRequest(path, `${path}: ranges ${clash.text} and ${text} overlap`);
    ranges.push({ start, end, text });
  }
}

/** The kubelet's cpuset list syntax: `0-3,8,10-11`; a range must not run backwards. */
export function checkReservedCpus(value: string, path: string): void {
  if (!/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(value)) {
    throw badRequest(path, `${path} must be a list of CPU numbers and ranges such as 0-3,8,10-11 (got "${value}")`);
  }
  for (const part of value.split(",")) {
    const [from, to] = part.split("-").map(Number);
    if (to !== undefined && (from as number) > to) {
      throw badRequest(path, `${path}: range ${part} is descending (write the lower CPU first)`);
    }
  }
}

export function checkDailyTime(value: string, path: string): void {
  if (!/^([01]\d|2[0-3]):[0-5]\d$/.test(value)) {
    throw badRequest(path, `${path} must be a time of day written HH:MM (00:00 to 23:59), got "${value}"`);
  }
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

export function hasControlChars(value: string): boolean {
  return CONTROL.test(value);
}

export function checkNoControlChars(value: string, path: string): void {
  if (hasControlChars(value)) throw badRequest(path, `${path} must not contain control characters`);
}

/** A plain token (registry host, image tag): no whitespace or control characters. */
export function checkToken(value: string, path: string): void {
  if (/\s/.test(value) || hasControlChars(value)) {
    throw badRequest(path, `${path} must not contain whitespace or control characters`);
  }
}

/** Backups land on the node's disk: an absolute path without `..`, so it cannot climb out of where it says. */
export function checkAbsolutePath(value: string, path: string): void {
  if (!value.startsWith("/") || hasControlChars(value) || value.split("/").includes("..")) {
    throw badRequest(path, `${path} must be an absolute path without '..' segments (got "${value}")`);
  }
}

/**
 * A Kubernetes resource quantity (`2000m`, `0.5`, `512Mi`): the Calico limits are passed to
 * the pods' resource limits, where anything else would fail the deployment much later.
 */
export function checkQuantity(value: string, path: string): void {
  if (!/^(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$/.test(value)) {
    throw badRequest(path, `${path} must be a Kubernetes resource quantity such as 500m or 512Mi (got "${value}")`);
  }
}

/** RFC 1123 host name (also matches a dotted IPv4 address, which clients use here too). */
export function checkHostname(value: string, path: string): void {
  const label = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;
  if (value.length > 253 || !value.split(".").every((l) => label.test(l))) {
    throw badRequest(path, `${path} must be a DNS name such as api.example.com (got "${value}")`);
  }
}

/** Linux interface names (keepalived binds the VIP to it): 1-15 bytes, no '/', ':' or whitespace. */
export function checkInterfaceName(value: string, path: string): void {
  if (value.length > 15 || value === "." || value === ".." || /[/:\s]/.test(value) || hasControlChars(value)) {
    throw badRequest(path, `${path} must be a network interface name such as eth0 (at most 15 characters)`);
  }
}

export function checkHttpUrl(value: string, path: string): void {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw badRequest(path, `${path} must be an http(s) URL (got "${value}")`);
  }
}

/**
 * httpProxy: the proxy rule the agent and the node's containerd apply too (protocol's
 * proxy-url.ts), after the token check (URL parsing would drop a tab or newline silently).
 */
export function checkProxy(value: string, path: string): void {
  checkToken(value, path);
  const problem = checkProxyUrl(value);
  if (problem) throw badRequest(path, `${path} ${problem} (got "${value}")`);
}

export function checkOneOf(values: readonly string[]): (value: string, path: string) => void {
  return (value, path) => {
    if (!values.includes(value)) {
      throw badRequest(path, `${path} must be one of ${values.join(", ")} (got "${value}")`);
    }
  };
}
