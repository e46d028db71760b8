import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

// Key material for the cluster PKI. ECDSA P-256 everywhere: key generation takes a millisecond
// (RSA 2048 takes tens), and every Kubernetes component and kubectl accept it.

/** Node's type for a WebCrypto key (the project does not load the DOM lib). */
export type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const crypto = webcrypto;
/** Node's WebCrypto in the type @peculiar/x509 declares for its `crypto` arguments. */
export const webCrypto = crypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0];
// Also the default, for the @peculiar/x509 calls that take no crypto argument.
x509.cryptoProvider.set(webCrypto);

export const EC_KEY: webcrypto.EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
export const SIGNING_ALGORITHM: webcrypto.EcdsaParams = { name: "ECDSA", hash: "SHA-256" };

export function generateKeyPair(): Promise<CryptoKeyPair> {
  // Extractable: the private key leaves as PKCS#8 (encrypted at rest, or handed to the client).
  return crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
}

export async function privateKeyToPem(key: CryptoKey): Promise<string> {
  const der = await crypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

export function importSigningKey(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decodeFirst(pem);
  return crypto.subtle.importKey("pkcs8", der, EC_KEY, false, ["sign"]);
}

/**
 * A random positive serial of 16 bytes (RFC 5280 allows up to 20). The top bit is cleared so
 * DER does not read it as negative, and the next one set so no leading zero byte gets trimmed.
 */
export function randomSerial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return Buffer.from(bytes).toString("hex");
}
