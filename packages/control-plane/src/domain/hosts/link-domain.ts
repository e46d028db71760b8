import type { Db } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";
import type { LinkDomain } from "../../agents/link-domain.ts";
import type { SecretCipher } from "../../secrets/cipher.ts";
import { applyClusterReport } from "../external-clusters/agent-reports.ts";
import type { IdentityResolver } from "../identity/resolver.ts";
import { verifyClusterAccessToken } from "../kubeconfig/access-tokens.ts";
import { BackupReportWriter } from "./backup-reports.ts";
import { NodeCertificateSigner } from "./cert-signer.ts";
import { HostAuthenticator } from "./host-auth.ts";
import { NodeReportWriter } from "./node-reports.ts";
import { type PresenceOptions, PresenceWriter } from "./presence.ts";

/** What the agent link asks of the domain (agents/link-domain.ts), answered from the database. */
export function hostLinkDomain(options: {
  db: Db;
  identity: IdentityResolver;
  cipher: SecretCipher;
  log: FastifyBaseLogger;
  presence?: PresenceOptions;
}): LinkDomain {
  const { db, identity } = options;
  const auth = new HostAuthenticator(db);
  const reports = new NodeReportWriter(db);
  const backups = new BackupReportWriter(db);
  const signer = new NodeCertificateSigner(db, options.cipher);
  return {
    authenticate: (headers) => auth.authenticate(headers),
    presence: new PresenceWriter(db, options.log, options.presence),
    applyNodeReport: (hostId, frame) => reports.apply(hostId, frame),
    applyBackupReport: (hostId, frame) => backups.apply(hostId, frame),
    applyClusterReport: (hostId, frame) => applyClusterReport(db, hostId, frame),
    signCertificate: (hostId, frame) => signer.sign(hostId, frame),
    async tokenGrantsProject(token, projectId) {
      const who = await identity.resolve(token);
      return who !== null && (who.kind === "admin" || who.projectId === projectId);
    },
    async clusterTokenSubject(hostId, token) {
      // Only tokens issued for the cluster this node is in: a bouncer of another cluster gets null.
      const clusterId = await reports.clusterOf(hostId);
      return clusterId ? await verifyClusterAccessToken(db, clusterId, token) : null;
    },
  };
}
