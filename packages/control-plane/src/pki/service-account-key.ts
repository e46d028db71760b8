import { createECDH, createPrivateKey, hkdfSync } from "node:crypto";

/** The order of P-256: a private scalar must lie in [1, n-1]. */
const P256_ORDER = BigInt("0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551");

/**
 * The cluster's service-account token signing key (kube-apiserver --service-account-signing-key-file,
 * ES256): one per cluster, the same on every master, so a token one master signs every other
 * accepts. It is derived from the cluster CA's private key (HKDF-SHA256, bound to the cluster id)
 * rather than stored: nothing new to keep or encrypt, it changes exactly when the CA does, and it
 * leaves the control plane only inside the answer to a master's apiserver certificate request
 * (never through the API).
 */
export function serviceAccountKeyPem(caKeyPem: string, clusterId: string): string {
  return derivedP256KeyPem(caKeyPem, `service-account-signing-key:${clusterId}`);
}

/**
 * A P-256 private key (PKCS#8 PEM) derived from the cluster CA's key for one purpose (`info`,
 * which names the purpose and the cluster): the same every time, a different key per purpose.
 */
export function derivedP256KeyPem(caKeyPem: string, info: string): string {
  const ikm = createPrivateKey(caKeyPem).export({ type: "pkcs8", format: "der" });
  const okm = Buffer.from(hkdfSync("sha256", ikm, "keelson", info, 48));
  // 48 bytes reduced mod n: the bias is below 2^-128.
  const scalar = (BigInt(`0x${okm.toString("hex")}`) % (P256_ORDER - 1n)) + 1n;
  const d = Buffer.from(scalar.toString(16).padStart(64, "0"), "hex");
  const ecdh = createECDH("prime256v1");
  ecdh.setPrivateKey(d);
  const pub = ecdh.getPublicKey(); // 0x04 || x || y
  const b64 = (b: Buffer) => b.toString("base64url");
  const key = createPrivateKey({
    key: { kty: "EC", crv: "P-256", d: b64(d), x: b64(pub.subarray(1, 33)), y: b64(pub.subarray(33, 65)) },
    format: "jwk",
  });
  return key.export({ type: "pkcs8", format: "pem" }).toString();
}
