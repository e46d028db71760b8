import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Opaque bearer secrets. They carry 256 bits of randomness, so a fast hash is enough to store
 * them (a slow KDF is for low-entropy passwords, see passwords.ts).
 */
export function generateSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString("base64url")}`;
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

export function sameHash(a: string, b: string): boolean {
  const ba = Buffer.from(a, "hex");
  const bb = Buffer.from(b, "hex");
  return ba.length === bb.length && timingSafeEqual(ba, bb);
}
