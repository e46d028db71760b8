/**
 * IPv4 and CIDR arithmetic, one implementation for the control plane (field rules,
 * certificate names) and the agent (phases): both must agree on what an address or a block is.
 * Addresses are unsigned 32-bit numbers.
 */

const OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const IPV4 = new RegExp(`^${OCTET}\\.${OCTET}\\.${OCTET}\\.${OCTET}$`);

/** Dotted-quad IPv4 without leading zeros (`010.0.0.1` is octal to some parsers: refused). */
export function parseIpv4(text: string): number | undefined {
  if (!IPV4.test(text)) return undefined;
  return text.split(".").reduce((acc, octet) => acc * 256 + Number(octet), 0);
}

export function formatIpv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");
}

/** A CIDR block: its first and last address and its prefix length. */
export interface Ipv4Block {
  start: number;
  end: number;
  prefix: number;
}

export type Ipv4CidrParse =
  | { ok: true; block: Ipv4Block }
  | { ok: false; problem: "syntax" }
  /** The address is not its block's network address: `network` is what was probably meant. */
  | { ok: false; problem: "host-bits"; network: string };

/**
 * `a.b.c.d/prefix`, whose address must be the network address of its block: `10.20.1.0/16` is
 * refused because Kubernetes would silently use 10.20.0.0/16 and the operator would not get
 * what they wrote.
 */
export function parseIpv4Cidr(text: string): Ipv4CidrParse {
  const m = /^([0-9.]+)\/(3[0-2]|[12]?\d)$/.exec(text);
  const address = m ? parseIpv4(m[1] as string) : undefined;
  if (!m || address === undefined) return { ok: false, problem: "syntax" };
  const prefix = Number(m[2]);
  const size = 2 ** (32 - prefix);
  const start = Math.floor(address / size) * size;
  if (start !== address) return { ok: false, problem: "host-bits", network: `${formatIpv4(start)}/${prefix}` };
  return { ok: true, block: { start, end: start + size - 1, prefix } };
}

export function blockContains(block: Ipv4Block, address: number): boolean {
  return address >= block.start && address <= block.end;
}

export function blocksOverlap(a: Ipv4Block, b: Ipv4Block): boolean {
  return a.start <= b.end && b.start <= a.end;
}

/** The nth address of the block (1: the kubernetes service IP, 10: cluster DNS). */
export function nthAddress(block: Ipv4Block, n: number): string {
  return formatIpv4(block.start + n);
}
