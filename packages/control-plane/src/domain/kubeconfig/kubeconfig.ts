import { CLUSTER_ADMINS_GROUP } from "@keelson/protocol";
import type { Keelson } from "../../context.ts";
import { conflict } from "../../http/errors.ts";
import { generateKeyPair, privateKeyToPem } from "../../pki/keys.ts";
import { signCertificate } from "../../pki/sign.ts";
import { findCluster as findClusterInProject } from "../clusters/views.ts";
import { issueClusterAccessToken } from "./access-tokens.ts";
import { certExpiryHours } from "./cluster-settings.ts";
import { clusterApiServerUrl } from "./endpoint.ts";
import { type KubeconfigCredential, renderKubeconfig } from "./render.ts";

/** The group (certificate O) of kubeconfig client certificates; the protocol says why this one. */
export const CLIENT_CERT_GROUP = CLUSTER_ADMINS_GROUP;

export interface KubeconfigRequest {
  projectId: string;
  clusterId: string;
  /** Who it is for (subject.ts): the Kubernetes user name and the credential's record. */
  subject: string;
  /** How long the credential lasts; default the cluster's certExpiryHrs (a web CLI session: its own length). */
  validHours?: number;
  /** A client certificate instead of a bearer token. */
  forceCertAuth: boolean;
  now?: Date;
}

export interface IssuedKubeconfig {
  clusterName: string;
  yaml: string;
}

async function clientCertificate(
  keelson: Pick<Keelson, "cipher">,
  ca: { certPem: string; keyEnc: string },
  subject: string,
  validHours: number,
): Promise<KubeconfigCredential> {
  const keys = await generateKeyPair();
  const { certPem } = await signCertificate(
    { certPem: ca.certPem, keyPem: keelson.cipher.decrypt(ca.keyEnc) },
    {
      publicKey: keys.publicKey,
      subject: { commonName: subject, organization: [CLIENT_CERT_GROUP] },
      usages: ["client"],
      validHours,
    },
  );
  return { certPem, keyPem: await privateKeyToPem(keys.privateKey) };
}

/**
 * A kubeconfig for one cluster, with a fresh credential for the caller: a bearer token by
 * default (checked by the node bouncer), or a client certificate signed by the cluster CA.
 * Both expire after the cluster's certExpiryHrs. Nothing is stored when the cluster has no
 * API endpoint yet.
 */
export async function issueKubeconfig(
  keelson: Pick<Keelson, "db" | "cipher">,
  req: KubeconfigRequest,
): Promise<IssuedKubeconfig> {
  const cluster = await findClusterInProject(keelson.db, req.projectId, req.clusterId);
  const server = await clusterApiServerUrl(keelson.db, cluster);
  if (server === undefined) {
    throw conflict(
      `cluster ${cluster.name} has no API endpoint yet: set externalDnsName or masterVipIpv4, or attach a master`,
      "no_api_endpoint",
    );
  }
  const { subject } = req;
  const validHours = req.validHours ?? certExpiryHours(cluster.spec);
  const credential = req.forceCertAuth
    ? await clientCertificate(keelson, { certPem: cluster.caCertPem, keyEnc: cluster.caKeyEnc }, subject, validHours)
    : {
        token: (
          await issueClusterAccessToken(keelson.db, {
            projectId: cluster.projectId,
            clusterId: cluster.id,
            subject,
            validHours,
            now: req.now ?? new Date(),
          })
        ).token,
      };
  const yaml = renderKubeconfig({
    clusterName: cluster.name,
    server,
    caCertPem: cluster.caCertPem,
    userName: `${cluster.name}-${subject}`,
    credential,
  });
  return { clusterName: cluster.name, yaml };
}
