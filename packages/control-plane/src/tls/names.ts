import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";

/** What a server certificate must name: DNS names and IP addresses. */
export interface ServerNames {
  dnsNames: string[];
  ipAddresses: string[];
}

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * The names clients reach this control plane by: the host of KEELSON_PUBLIC_URL (what agents
 * and package downloads are given), the listen address, and KEELSON_TLS_SERVER_NAMES. A
 * wildcard listener is reached by any of the machine's addresses, so they are all named, with
 * the machine's host name and localhost.
 */
export function serverNames(input: {
  publicUrl?: string | undefined;
  host: string;
  tlsServerNames?: string | undefined;
}): ServerNames {
  const names: string[] = [];
  if (input.publicUrl) names.push(new URL(input.publicUrl).hostname.replace(/^\[|\]$/g, ""));
  if (WILDCARD.has(input.host)) {
    names.push("localhost", hostname());
    for (const addresses of Object.values(networkInterfaces())) {
      for (const a of addresses ?? []) names.push(a.address.replace(/%.*$/, ""));
    }
  } else {
    names.push(input.host);
  }
  for (const extra of (input.tlsServerNames ?? "").split(",")) if (extra.trim()) names.push(extra.trim());
  const unique = [...new Set(names.map((n) => n.toLowerCase()))];
  return {
    dnsNames: unique.filter((n) => isIP(n) === 0).sort(),
    ipAddresses: unique.filter((n) => isIP(n) !== 0).sort(),
  };
}
