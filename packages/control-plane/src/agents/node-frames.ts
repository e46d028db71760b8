import type { BackupReportFrame, CertSignFrame, ClusterTokenVerifyFrame, NodeReportFrame } from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import type { LinkDomain } from "./link-domain.ts";
import type { NodeEvents } from "./node-events.ts";
import type { AgentSession } from "./sessions.ts";

/**
 * The hub's answers to a node's frames: phase reports (stored, then announced on the node
 * events operations wait on), etcd backup reports, certificate requests and cluster-token
 * checks. Each asks the domain through LinkDomain and answers on the session it came from.
 */
export class NodeFrameAnswers {
  constructor(
    private readonly domain: LinkDomain,
    private readonly nodeEvents: NodeEvents,
    private readonly log: FastifyBaseLogger,
  ) {}

  async nodeReport(session: AgentSession, frame: NodeReportFrame): Promise<void> {
    const outcome = await this.domain.applyNodeReport(session.hostId, frame);
    if (!outcome.stored) {
      this.log.debug(
        { hostId: session.hostId, reported: frame.clusterId, expected: outcome.expected },
        "node report of another cluster membership ignored",
      );
      return;
    }
    this.nodeEvents.emit({
      type: "node-report",
      hostId: session.hostId,
      clusterId: frame.clusterId,
      report: frame.report,
      apiResponding: frame.apiResponding,
      ...(frame.etcd ? { etcd: frame.etcd } : {}),
    });
  }

  async backupReport(session: AgentSession, frame: BackupReportFrame): Promise<void> {
    const outcome = await this.domain.applyBackupReport(session.hostId, frame);
    if (!outcome.stored) {
      this.log.debug({ hostId: session.hostId, clusterId: frame.clusterId, why: outcome.why }, "backup report ignored");
    } else if (!frame.ok) {
      this.log.warn({ hostId: session.hostId, clusterId: frame.clusterId, error: frame.error }, "etcd backup failed");
    }
  }

  certSign(session: AgentSession, frame: CertSignFrame): void {
    this.domain.signCertificate(session.hostId, frame).then(
      (answer) => {
        if (!answer.ok)
          this.log.warn(
            { hostId: session.hostId, profile: frame.profile, error: answer.error.message },
            "certificate request refused",
          );
        session.send(answer);
      },
      (err: unknown) => {
        this.log.error({ err, hostId: session.hostId, profile: frame.profile }, "signing a node certificate failed");
        session.send({
          type: "cert.signed",
          id: frame.id,
          ok: false,
          error: { code: "FAILED", message: "the control plane could not sign the request; see its log" },
        });
      },
    );
  }

  async clusterTokenVerify(session: AgentSession, frame: ClusterTokenVerifyFrame): Promise<void> {
    const subject = await this.domain.clusterTokenSubject(session.hostId, frame.token);
    session.send({ type: "cluster-token.verified", id: frame.id, subject });
  }
}
