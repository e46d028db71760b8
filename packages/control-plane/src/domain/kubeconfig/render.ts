import { stringify } from "yaml";

export type KubeconfigCredential = { token: string } | { certPem: string; keyPem: string };

export interface KubeconfigParts {
  clusterName: string;
  server: string;
  caCertPem: string;
  /** The kubeconfig's user entry name. */
  userName: string;
  credential: KubeconfigCredential;
}

const b64 = (pem: string) => Buffer.from(pem, "utf8").toString("base64");

/** A single-cluster kubeconfig (clientcmd v1) with everything inline, so the file stands alone. */
export function renderKubeconfig(parts: KubeconfigParts): string {
  const user =
    "token" in parts.credential
      ? { token: parts.credential.token }
      : {
          "client-certificate-data": b64(parts.credential.certPem),
          "client-key-data": b64(parts.credential.keyPem),
        };
  const document = {
    apiVersion: "v1",
    kind: "Config",
    preferences: {},
    clusters: [
      {
        name: parts.clusterName,
        cluster: { server: parts.server, "certificate-authority-data": b64(parts.caCertPem) },
      },
    ],
    users: [{ name: parts.userName, user }],
    contexts: [{ name: parts.clusterName, context: { cluster: parts.clusterName, user: parts.userName } }],
    "current-context": parts.clusterName,
  };
  // No line folding: base64 blobs must stay on one line for every YAML reader.
  return stringify(document, { lineWidth: 0 });
}
