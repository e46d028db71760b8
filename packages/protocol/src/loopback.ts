import { isIP } from "node:net";

/**
 * Whether a listen host is reachable from this machine only. A name other than `localhost`
 * could resolve anywhere, and the wildcard addresses listen on every interface: not loopback.
 * The server decides plain HTTP by it (KEELSON_TLS's default), so the CLI finds it by it too.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  if (h === "localhost") return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || /^::ffff:127\./.test(h);
  return false;
}
