import { createPrivateKey, createPublicKey, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";
import type { ClusterCa } from "./cluster-ca.ts";
import { importSigningKey, randomSerial, SIGNING_ALGORITHM, webCrypto } from "./keys.ts";
import { derivedP256KeyPem } from "./service-account-key.ts";

/**
 * The signing CA of a cluster's certificates API: what kube-controller-manager gets as
 * --cluster-signing-cert-file/--cluster-signing-key-file on every master. kubeadm hands the
 * controller-manager the cluster CA's own key; Keelson keeps that key in the control plane
 * (least privilege: a master never holds a key that could mint another CA) and gives the
 * masters an intermediate instead: CA:true with path length 0 (it can sign leaves, never
 * another CA), valid no longer than the cluster CA, its key derived from the cluster CA's key
 * like the service-account key (the same on every master, nothing new to store, replaced when
 * the CA is). It leaves the control plane only in the answer to a master's
 * kube-controller-manager certificate request.
 *
 * What it signs chains to the cluster CA through it: a client that trusts only the cluster CA
 * needs the intermediate beside the leaf (Keelson's own nodes get their certificates over the
 * link, not through the certificates API, so nothing Keelson runs depends on it yet).
 */
export async function clusterSigningCa(ca: ClusterCa, clusterId: string): Promise<ClusterCa> {
  const keyPem = derivedP256KeyPem(ca.keyPem, `cluster-signing-ca:${clusterId}`);
  const caCert = new x509.X509Certificate(ca.certPem);
  // Only the public half goes into the certificate; the CA's key signs it.
  const spki = createPublicKey(createPrivateKey(keyPem)).export({ type: "spki", format: "der" });
  const publicKey = await webcrypto.subtle.importKey("spki", spki, { name: "ECDSA", namedCurve: "P-256" }, true, [
    "verify",
  ]);
  const caKeyId = caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerial(),
      subject: [{ CN: [`keelson-cluster-signing-${clusterId}`] }, { O: ["keelson"] }],
      issuer: caCert.subjectName,
      notBefore: new Date(Date.now() - 5 * 60_000),
      notAfter: caCert.notAfter,
      publicKey,
      signingKey: await importSigningKey(ca.keyPem),
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature,
          true,
        ),
        await x509.SubjectKeyIdentifierExtension.create(publicKey, false, webCrypto),
        ...(caKeyId ? [new x509.AuthorityKeyIdentifierExtension(caKeyId, false)] : []),
      ],
    },
    webCrypto,
  );
  return { certPem: cert.toString("pem"), keyPem };
}
