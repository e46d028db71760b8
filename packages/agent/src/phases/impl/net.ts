import { createServer } from "node:net";

/** IPv4 CIDR arithmetic for the cluster's containers and services ranges. */

export interface Ipv4Cidr {
  text: string;
  network: number;
  prefix: number;
  size: number;
}

export function parseIpv4(text: string): number | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = value * 256 + Number(part);
  }
  return value;
}

export function formatIpv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");
}

export function parseIpv4Cidr(text: string, field: string): Ipv4Cidr {
  const [ip, prefixText] = text.split("/");
  const address = parseIpv4(ip ?? "");
  const prefix = Number(prefixText);
  if (address === undefined || !/^\d{1,2}$/.test(prefixText ?? "") || prefix > 30 || prefix < 8) {
    throw new Error(`${field} "${text}" is not an IPv4 CIDR with a prefix from /8 to /30`);
  }
  const size = 2 ** (32 - prefix);
  const network = address - (address % size);
  if (network !== address)
    throw new Error(`${field} "${text}" has host bits set (did you mean ${formatIpv4(network)}/${prefix}?)`);
  return { text, network, prefix, size };
}

export function cidrContains(cidr: Ipv4Cidr, ip: number): boolean {
  return ip >= cidr.network && ip < cidr.network + cidr.size;
}

export function cidrsOverlap(a: Ipv4Cidr, b: Ipv4Cidr): boolean {
  return a.network < b.network + b.size && b.network < a.network + a.size;
}

/** The nth address of the range (1: the kubernetes service IP, 10: cluster DNS). */
export function nthAddress(cidr: Ipv4Cidr, n: number): string {
  return formatIpv4(cidr.network + n);
}

/** Tries to bind ip:port; resolves undefined when it could, else the error code (EADDRINUSE...). */
export function tryBind(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
