import * as x509 from "@peculiar/x509";
import { generateKeyPair, privateKeyToPem, randomSerial, SIGNING_ALGORITHM, webCrypto } from "./keys.ts";

/** A cluster's certificate authority. `keyPem` is plaintext PKCS#8: callers encrypt it before storing. */
export interface ClusterCa {
  certPem: string;
  keyPem: string;
}

const CA_VALIDITY_YEARS = 10;

/**
 * Creates the self-signed CA that signs everything of one cluster (client certificates of
 * kubeconfigs, and later the kubelet, API server and etcd certificates). One CA per cluster,
 * so a leaked key compromises one cluster only.
 */
export async function createClusterCa(clusterName: string, clusterId: string): Promise<ClusterCa> {
  // The structured form, so names with commas or '=' need no escaping. The cluster id in
  // OU tells apart CAs of clusters that reused a name.
  return createSelfSignedCa([{ CN: [`keelson-ca-${clusterName}`] }, { O: ["keelson"] }, { OU: [clusterId] }]);
}

/** A self-signed CA (ECDSA P-256, 10 years) under `name`: the clusters' CAs and the control plane's own. */
export async function createSelfSignedCa(name: x509.JsonName): Promise<ClusterCa> {
  const keys = await generateKeyPair();
  const notBefore = new Date(Date.now() - 5 * 60_000);
  const notAfter = new Date(notBefore);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + CA_VALIDITY_YEARS);
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: randomSerial(),
      name,
      notBefore,
      notAfter,
      keys,
      signingAlgorithm: SIGNING_ALGORITHM,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webCrypto),
      ],
    },
    webCrypto,
  );
  return { certPem: cert.toString("pem"), keyPem: await privateKeyToPem(keys.privateKey) };
}
