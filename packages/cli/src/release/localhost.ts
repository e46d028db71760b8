import { isIP, isIPv4, isIPv6 } from "node:net";
import { usageError } from "../errors.ts";

/**
 * `keelson configure-localhost` (spec §4.9, step 3, before `upgrade`): the control plane's
 * listen addresses (IPv4/IPv6) and the settings a load balancer in front of it needs, as
 * changes to server.env's keelson-server settings:
 *
 *   --ipv4 / --ipv6 / --port  → KEELSON_LISTEN (keelson-server has one listener: one address, or
 *                               both wildcards as one dual-stack `[::]` listener, which Linux
 *                               serves IPv4 on as well)
 *   --lb-url                  → KEELSON_PUBLIC_URL (the URL hosts reach the control plane at;
 *                               its host also goes on an `auto` server certificate)
 *   --lb-addresses            → KEELSON_TRUST_PROXY (the balancer's addresses: client addresses
 *                               then come from its X-Forwarded-For)
 */
export interface LocalhostOptions {
  ipv4?: string | undefined;
  ipv6?: string | undefined;
  port?: string | undefined;
  lbUrl?: string | undefined;
  lbAddresses?: string | undefined;
}

/** KEELSON_LISTEN's default (the server's settings schema). */
const DEFAULT_LISTEN = "127.0.0.1:8080";

function listenPort(listen: string): string {
  return listen.slice(listen.lastIndexOf(":") + 1);
}

function listenOf(current: string, o: LocalhostOptions): string | undefined {
  if (o.ipv4 === undefined && o.ipv6 === undefined && o.port === undefined) return undefined;
  const port = o.port ?? listenPort(current);
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)
    throw usageError(`--port ${port}: must be a port from 1 to 65535`);
  if (o.ipv4 !== undefined && !isIPv4(o.ipv4)) throw usageError(`--ipv4 ${o.ipv4}: not an IPv4 address`);
  if (o.ipv6 !== undefined && !isIPv6(o.ipv6)) throw usageError(`--ipv6 ${o.ipv6}: not an IPv6 address`);
  if (o.ipv4 !== undefined && o.ipv6 !== undefined) {
    if (o.ipv4 !== "0.0.0.0" || !/^(::|0:0:0:0:0:0:0:0)$/.test(o.ipv6))
      throw usageError(
        "--ipv4 and --ipv6 together: keelson-server has one listener, so both only as the wildcards 0.0.0.0 and :: (one dual-stack listener on [::])",
      );
    return `[::]:${port}`;
  }
  if (o.ipv6 !== undefined) return `[${o.ipv6}]:${port}`;
  if (o.ipv4 !== undefined) return `${o.ipv4}:${port}`;
  return `${current.slice(0, current.lastIndexOf(":"))}:${port}`;
}

function checkAddresses(list: string): string {
  const items = list.split(",").map((a) => a.trim());
  for (const item of items) {
    const [address = "", bits, ...rest] = item.split("/");
    const family = isIP(address);
    const max = family === 4 ? 32 : 128;
    if (family === 0 || rest.length > 0 || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max)))
      throw usageError(`--lb-addresses: ${item || "(empty)"} is not an address or CIDR`);
  }
  return items.join(",");
}

/** The server.env keys to set, with their new values; empty when the options ask for nothing. */
export function localhostSettings(env: Record<string, string>, o: LocalhostOptions): Record<string, string> {
  const changes: Record<string, string> = {};
  const listen = listenOf(env.KEELSON_LISTEN ?? DEFAULT_LISTEN, o);
  if (listen !== undefined) changes.KEELSON_LISTEN = listen;
  if (o.lbUrl !== undefined) {
    let url: URL;
    try {
      url = new URL(o.lbUrl);
    } catch {
      throw usageError(`--lb-url ${o.lbUrl}: not a URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw usageError(`--lb-url ${o.lbUrl}: must be an http:// or https:// URL`);
    changes.KEELSON_PUBLIC_URL = o.lbUrl.replace(/\/+$/, "");
  }
  if (o.lbAddresses !== undefined) changes.KEELSON_TRUST_PROXY = checkAddresses(o.lbAddresses);
  return changes;
}
