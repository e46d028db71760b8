import { isIP } from "node:net";
import * as x509 from "@peculiar/x509";
import type { ClusterCa } from "./cluster-ca.ts";
import { type CryptoKey, importSigningKey, randomSerial, SIGNING_ALGORITHM, webCrypto } from "./keys.ts";

export type CertificateUsage = "client" | "server";

export interface SignRequest {
  /** A PKCS#10 request (an agent's, later): its signature proves the requester holds the key. */
  csrPem?: string;
  /** Or the public key directly, when the control plane generated the pair itself. */
  publicKey?: CryptoKey;
  /** Always set by the CA's caller; a CSR's own subject is ignored, so a host cannot ask for more. */
  subject: { commonName: string; organization?: string[] };
  dnsNames?: string[];
  ipAddresses?: string[];
  usages: CertificateUsage[];
  validHours: number;
}

/** A request the CA refuses: a programming error or a bad CSR from an agent, never a crash. */
export class CertificateRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CertificateRequestError";
  }
}

/** Kubelets and browsers reject certificates that start "in the future" on a host whose clock is a bit behind. */
const CLOCK_SKEW_MS = 5 * 60_000;

async function requestedPublicKey(req: SignRequest): Promise<x509.PublicKeyType> {
  if (req.csrPem !== undefined) {
    let csr: x509.Pkcs10CertificateRequest;
    try {
      csr = new x509.Pkcs10CertificateRequest(req.csrPem);
    } catch {
      throw new CertificateRequestError("csrPem is not a PEM PKCS#10 certificate request");
    }
    if (!(await csr.verify(webCrypto))) {
      throw new CertificateRequestError("csrPem: the request's signature does not match its public key");
    }
    return csr.publicKey;
  }
  if (req.publicKey) return req.publicKey;
  throw new CertificateRequestError("either csrPem or publicKey is required");
}

function checkRequest(req: SignRequest): void {
  if (!req.subject.commonName) throw new CertificateRequestError("subject.commonName must not be empty");
  if (!Number.isFinite(req.validHours) || req.validHours <= 0) {
    throw new CertificateRequestError("validHours must be a number greater than 0");
  }
  if (req.usages.length === 0) throw new CertificateRequestError("usages must name client, server or both");
  for (const ip of req.ipAddresses ?? []) {
    if (isIP(ip) === 0) throw new CertificateRequestError(`ipAddresses: ${ip} is not an IP address`);
  }
  for (const name of req.dnsNames ?? []) {
    if (name.trim() === "") throw new CertificateRequestError("dnsNames must not contain empty names");
  }
}

/** Signs a leaf certificate with a cluster CA. The leaf never outlives the CA. */
export async function signCertificate(ca: ClusterCa, req: SignRequest): Promise<{ certPem: string }> {
  checkRequest(req);
  const caCert = new x509.X509Certificate(ca.certPem);
  const [signingKey, publicKey] = await Promise.all([importSigningKey(ca.keyPem), requestedPublicKey(req)]);

  const now = Date.now();
  const notBefore = new Date(now - CLOCK_SKEW_MS);
  const notAfter = new Date(Math.min(now + req.validHours * 3_600_000, caCert.notAfter.getTime()));

  const extendedUsages = req.usages.map((u) =>
    u === "client" ? x509.ExtendedKeyUsage.clientAuth : x509.ExtendedKeyUsage.serverAuth,
  );
  const altNames: x509.JsonGeneralNames = [
    ...(req.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(req.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  const caKeyId = caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension(extendedUsages, false),
    await x509.SubjectKeyIdentifierExtension.create(publicKey, false, webCrypto),
    caKeyId
      ? new x509.AuthorityKeyIdentifierExtension(caKeyId, false)
      : await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey, false, webCrypto),
  ];
  if (altNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));

  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerial(),
      // Kubernetes reads the user name from CN and the groups from every O.
      subject: [{ CN: [req.subject.commonName] }, ...(req.subject.organization ?? []).map((o) => ({ O: [o] }))],
      issuer: caCert.subjectName,
      notBefore,
      notAfter,
      publicKey,
      signingKey,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions,
    },
    webCrypto,
  );
  return { certPem: cert.toString("pem") };
}
