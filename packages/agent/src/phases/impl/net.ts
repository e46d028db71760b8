import { createServer } from "node:net";
import { type Ipv4Block, parseIpv4Cidr } from "@keelson/protocol";

/**
 * The cluster's containers and services ranges as the phases take them: the arithmetic is the
 * protocol's (shared with the control plane); the phases add Kubernetes' limits on the prefix.
 */
export function clusterRange(text: string, field: string): Ipv4Block {
  const parsed = parseIpv4Cidr(text);
  if (!parsed.ok && parsed.problem === "host-bits") {
    throw new Error(`${field} "${text}" has host bits set (did you mean ${parsed.network}?)`);
  }
  if (!parsed.ok || parsed.block.prefix > 30 || parsed.block.prefix < 8) {
    throw new Error(`${field} "${text}" is not an IPv4 CIDR with a prefix from /8 to /30`);
  }
  return parsed.block;
}

/** Tries to bind ip:port; resolves undefined when it could, else the error code (EADDRINUSE...). */
export function tryBind(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
