import { badRequest } from "../../http/errors.ts";

/**
 * OpenSSH public keys (`<type> <base64 blob> [comment]`, RFC 4253 §6.6, RFC 5656, RFC 8709).
 * The blob is parsed, not just pattern-matched: its embedded type must match the prefix and its
 * fields must have the sizes of that key type, so a truncated paste or a private key is refused
 * here instead of failing later inside a cloud.
 */
export const SSH_KEY_TYPES = [
  "ssh-rsa",
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
] as const;

export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

export interface SshPublicKey {
  type: SshKeyType;
  comment: string;
}

/** Uncompressed EC point sizes: 0x04 || X || Y. */
const EC_POINT_BYTES: Record<string, number> = { nistp256: 65, nistp384: 97, nistp521: 133 };
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const MIN_RSA_BITS = 1024;

class Reader {
  private offset = 0;
  constructor(private readonly buf: Buffer) {}

  /** An SSH `string`: uint32 length, then that many bytes. */
  bytes(): Buffer {
    if (this.offset + 4 > this.buf.length) throw new Error("truncated");
    const length = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    if (this.offset + length > this.buf.length) throw new Error("truncated");
    const out = this.buf.subarray(this.offset, this.offset + length);
    this.offset += length;
    return out;
  }

  get done(): boolean {
    return this.offset === this.buf.length;
  }
}

/** Echoes a fragment of the input in an error message without control characters or length. */
function printable(value: string): string {
  return value.replace(/[^\x20-\x7e]/g, "?").slice(0, 40);
}

function invalid(rule: string): never {
  throw badRequest("key", `key is not a valid OpenSSH public key: ${rule}`, "invalid_ssh_key");
}

/** mpint: big-endian two's complement; a positive number with a redundant leading zero is still valid. */
function mpintBits(value: Buffer): number {
  let i = 0;
  while (i < value.length && value[i] === 0) i++;
  if (i === value.length) return 0;
  return (value.length - i - 1) * 8 + (32 - Math.clz32(value[i] as number));
}

function checkBody(type: SshKeyType, reader: Reader): void {
  if (type === "ssh-ed25519") {
    if (reader.bytes().length !== 32) invalid("an ed25519 key is 32 bytes");
  } else if (type === "ssh-rsa") {
    const e = reader.bytes();
    const n = reader.bytes();
    if (mpintBits(e) === 0 || mpintBits(n) < MIN_RSA_BITS)
      invalid(`an RSA key needs a modulus of at least ${MIN_RSA_BITS} bits`);
  } else {
    const curve = type.slice("ecdsa-sha2-".length);
    if (reader.bytes().toString("latin1") !== curve) invalid(`the curve inside the key is not ${curve}`);
    const point = reader.bytes();
    if (point.length !== EC_POINT_BYTES[curve] || point[0] !== 0x04) invalid(`the ${curve} point has the wrong size`);
  }
}

export function parseSshPublicKey(text: string): SshPublicKey {
  const line = text.trim();
  if (/[\r\n]/.test(line)) invalid("a public key is a single line");
  const [type, blob, ...comment] = line.split(/\s+/);
  if (!type || !blob) invalid('expected "<type> <base64 key> [comment]"');
  if (!(SSH_KEY_TYPES as readonly string[]).includes(type)) {
    invalid(`type must be one of ${SSH_KEY_TYPES.join(", ")} (got "${printable(type)}")`);
  }
  if (!BASE64.test(blob) || blob.length % 4 !== 0) invalid("the key data is not base64");
  const reader = new Reader(Buffer.from(blob, "base64"));
  try {
    const embedded = reader.bytes().toString("latin1");
    if (embedded !== type) invalid(`the key data is a ${printable(embedded)} key, not ${type}`);
    checkBody(type as SshKeyType, reader);
  } catch (err) {
    if (err instanceof Error && err.message === "truncated") invalid("the key data is truncated");
    throw err;
  }
  if (!reader.done) invalid("the key data has trailing bytes");
  return { type: type as SshKeyType, comment: comment.join(" ") };
}
