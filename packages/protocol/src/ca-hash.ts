import { createHash, createPublicKey, X509Certificate } from "node:crypto";

/**
 * The pin of a CA, in kubeadm's form: `sha256:<hex>` of the DER SubjectPublicKeyInfo of the CA
 * certificate. The control plane puts it in every join-token answer and agents check the CA
 * bundle they fetch against it (KEELSON_CA_HASH), so both sides compute it here, one way.
 * Hashing the public key rather than the whole certificate keeps the pin valid across a
 * re-issue of the same CA key (a new validity period).
 */
export function caCertHash(certPem: string): string {
  const spki = createPublicKey(certPem).export({ type: "spki", format: "der" });
  return `sha256:${createHash("sha256").update(spki).digest("hex")}`;
}

export const CA_HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** The certificates of a PEM bundle, each as its own PEM block (anything else is skipped). */
export function splitPemCertificates(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((b) => `${b}\n`) ?? [];
}

/** Whether a PEM certificate is a CA certificate (basicConstraints CA:TRUE); false if unreadable. */
export function isCaCertificate(certPem: string): boolean {
  try {
    return new X509Certificate(certPem).ca;
  } catch {
    return false;
  }
}

/**
 * The certificates of `bundle` that are CAs whose hash is one of `pins`, as one PEM ("" when
 * none): what a pinned client (the agent's KEELSON_CA_HASH, `keelson login --ca-hash`) trusts.
 */
export function pinnedCaCertificates(bundle: string, pins: readonly string[]): string {
  return splitPemCertificates(bundle)
    .filter((pem) => isCaCertificate(pem) && pins.includes(caCertHash(pem)))
    .join("");
}
