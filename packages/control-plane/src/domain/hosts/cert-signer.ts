import { clusters, type Db, firstRow, nodes } from "@keelson/db";
import type { CertSignedFrame, CertSignFrame } from "@keelson/protocol";
import * as x509 from "@peculiar/x509";
import { and, eq, ne } from "drizzle-orm";
import { clusterSigningCa } from "../../pki/cluster-signing-ca.ts";
import { serviceAccountKeyPem } from "../../pki/service-account-key.ts";
import { CertificateRequestError, signCertificate } from "../../pki/sign.ts";
import type { SecretCipher } from "../../secrets/cipher.ts";
import { decideCertificate } from "./cert-policy.ts";

/** Node certificates live a year; the agent renews them before they run out, and never past the CA. */
const NODE_CERT_VALID_HOURS = 365 * 24;

const SAN_OID = "2.5.29.17";

/** Code of a refused signing request in `cert.signed {ok:false}`. */
export const CERT_REFUSED = "REFUSED";

interface ParsedCsr {
  commonName: string | undefined;
  dnsNames: string[];
  ipAddresses: string[];
}

/** The subject CN and the SANs a CSR asks for; other SAN kinds (email, URI) are refused. */
function readCsr(csrPem: string): ParsedCsr {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(csrPem);
  } catch {
    throw new CertificateRequestError("csrPem is not a PEM PKCS#10 certificate request");
  }
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  const ext = csr.getExtension(SAN_OID);
  if (ext) {
    const san =
      ext instanceof x509.SubjectAlternativeNameExtension ? ext : new x509.SubjectAlternativeNameExtension(ext.rawData);
    for (const name of san.names.toJSON()) {
      if (name.type === "dns") dnsNames.push(name.value);
      else if (name.type === "ip") ipAddresses.push(name.value);
      else
        throw new CertificateRequestError(`the request asks for a ${name.type} name; only DNS and IP names are signed`);
    }
  }
  return { commonName: csr.subjectName.getField("CN")[0], dnsNames, ipAddresses };
}

/**
 * Answers an agent's `cert.sign`: the host must be attached to a cluster, and the request must
 * pass cert-policy.ts; then the cluster's CA (its key decrypted only for this signature) signs.
 */
export class NodeCertificateSigner {
  constructor(
    private readonly db: Db,
    private readonly cipher: SecretCipher,
  ) {}

  async sign(hostId: string, frame: CertSignFrame): Promise<CertSignedFrame> {
    const refuse = (message: string): CertSignedFrame => ({
      type: "cert.signed",
      id: frame.id,
      ok: false,
      error: { code: CERT_REFUSED, message: message.slice(0, 4096) },
    });
    const row = firstRow(
      await this.db
        .select({
          name: nodes.name,
          primaryIp: nodes.primaryIp,
          isMaster: nodes.isMaster,
          clusterId: nodes.clusterId,
          caCertPem: clusters.caCertPem,
          caKeyEnc: clusters.caKeyEnc,
          spec: clusters.spec,
        })
        .from(nodes)
        .leftJoin(clusters, eq(clusters.id, nodes.clusterId))
        .where(eq(nodes.id, hostId)),
    );
    if (!row?.clusterId || !row.caCertPem || !row.caKeyEnc || !row.spec) {
      return refuse(`host ${hostId} is not attached to a cluster: there is no CA to sign with`);
    }
    const otherNodes = await this.db
      .select({ name: nodes.name, primaryIp: nodes.primaryIp })
      .from(nodes)
      .where(and(eq(nodes.clusterId, row.clusterId), ne(nodes.id, hostId)));
    try {
      const csr = readCsr(frame.csrPem);
      const decision = decideCertificate(
        { hostId, name: row.name, primaryIp: row.primaryIp, isMaster: row.isMaster === 1 },
        { spec: row.spec, otherNodes },
        {
          profile: frame.profile,
          commonName: csr.commonName,
          dnsNames: [...frame.dnsNames, ...csr.dnsNames],
          ipAddresses: [...frame.ipAddresses, ...csr.ipAddresses],
        },
      );
      if (!decision.ok) return refuse(decision.reason);
      const caKeyPem = this.cipher.decrypt(row.caKeyEnc);
      const { certPem } = await signCertificate(
        { certPem: row.caCertPem, keyPem: caKeyPem },
        {
          csrPem: frame.csrPem,
          subject: decision.subject,
          dnsNames: decision.dnsNames,
          ipAddresses: decision.ipAddresses,
          usages: decision.usages,
          validHours: NODE_CERT_VALID_HOURS,
        },
      );
      // Signing awaited: a detach that landed meanwhile must not leave the node a certificate
      // of the cluster it just left.
      const now = firstRow(
        await this.db.select({ clusterId: nodes.clusterId }).from(nodes).where(eq(nodes.id, hostId)),
      );
      if (now?.clusterId !== row.clusterId)
        return refuse(`host ${hostId} left the cluster while its certificate was signed`);
      return {
        type: "cert.signed",
        id: frame.id,
        ok: true,
        certPem,
        caCertPem: row.caCertPem,
        // The masters' one service-account key travels with the apiserver certificate.
        ...(frame.profile === "apiserver"
          ? { serviceAccountKeyPem: serviceAccountKeyPem(caKeyPem, row.clusterId) }
          : {}),
        // The certificates API's signing CA travels with the controller-manager's certificate.
        ...(frame.profile === "kube-controller-manager"
          ? { clusterSigning: await clusterSigningCa({ certPem: row.caCertPem, keyPem: caKeyPem }, row.clusterId) }
          : {}),
      };
    } catch (err) {
      if (err instanceof CertificateRequestError) return refuse(err.message);
      throw err;
    }
  }
}
