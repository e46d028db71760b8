import { databaseUnavailable } from "@keelson/db";
import {
  AGENT_CAPABILITIES,
  type BackupReportFrame,
  type CertSignFrame,
  type ClusterReportFrame,
  type ClusterTokenVerifyFrame,
  type NodeReportFrame,
  type StatusFrame,
  type TokenVerifyFrame,
} from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import type { LinkDomain } from "./link-domain.ts";
import { agentEvent, type NodeEvents } from "./node-events.ts";
import type { AgentSession } from "./sessions.ts";

/** The longest wait between two tries of storing a node report while the database cannot take it. */
const REPORT_RETRY_MAX_MS = 5_000;

/**
 * The hub's answers to a node's frames: the agent's status (kept with its presence and
 * announced), phase reports (stored, then announced on the node events operations wait on),
 * etcd backup reports, external clusters' reports, certificate requests, join-token and cluster-token checks. Each asks the domain through LinkDomain and answers on the session it came from.
 */
export class NodeFrameAnswers {
  constructor(
    private readonly domain: LinkDomain,
    private readonly nodeEvents: NodeEvents,
    private readonly log: FastifyBaseLogger,
  ) {}

  status(session: AgentSession, frame: StatusFrame): void {
    const { agentStatus, agentVersion } = frame;
    this.domain.presence.change(session.hostId, { agentStatus, agentVersion, agentError: frame.agentError ?? null });
    this.nodeEvents.emit(agentEvent(session, frame));
  }

  async tokenVerify(session: AgentSession, frame: TokenVerifyFrame): Promise<void> {
    const valid = await this.domain.tokenGrantsProject(frame.token, session.projectId);
    session.send({ type: "token.verified", id: frame.id, valid });
  }

  async nodeReport(session: AgentSession, frame: NodeReportFrame): Promise<void> {
    const outcome = await this.untilStored(session, () => this.domain.applyNodeReport(session.hostId, frame));
    if (!outcome) return;
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
      projectId: session.projectId,
      clusterId: frame.clusterId,
      report: frame.report,
      apiResponding: frame.apiResponding,
      ...(frame.etcd ? { etcd: frame.etcd } : {}),
      namesCommands: session.capabilities.has(AGENT_CAPABILITIES.reportCommand),
      ...(frame.command ? { command: frame.command } : {}),
    });
  }

  /**
   * Stores a report, waiting out the database away or the storage full: an operation may be
   * waiting for exactly this report (a backup's, the cluster's record of it), and the agent
   * sends it once. The link's later frames
   * wait behind it (they are handled in order); undefined when the link closed meanwhile (the
   * agent reports again on its next link).
   */
  private async untilStored<T>(session: AgentSession, store: () => Promise<T>): Promise<T | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await store();
      } catch (err) {
        const away = databaseUnavailable(err);
        if (!away || !session.open) throw err;
        const delayMs = Math.min(REPORT_RETRY_MAX_MS, 250 * 2 ** attempt);
        this.log.warn({ hostId: session.hostId, reason: away, retryInMs: delayMs }, "node report not stored; retrying");
        await new Promise((resolve) => setTimeout(resolve, delayMs));
        if (!session.open) return undefined;
      }
    }
  }

  async backupReport(session: AgentSession, frame: BackupReportFrame): Promise<void> {
    const outcome = await this.untilStored(session, () => this.domain.applyBackupReport(session.hostId, frame));
    if (!outcome) return;
    if (!outcome.stored) {
      this.log.debug({ hostId: session.hostId, clusterId: frame.clusterId, why: outcome.why }, "backup report ignored");
    } else if (!frame.ok) {
      this.log.warn({ hostId: session.hostId, clusterId: frame.clusterId, error: frame.error }, "etcd backup failed");
    }
  }

  async clusterReport(session: AgentSession, frame: ClusterReportFrame): Promise<void> {
    const outcome = await this.untilStored(session, () => this.domain.applyClusterReport(session.hostId, frame));
    if (outcome && !outcome.stored) {
      this.log.debug({ hostId: session.hostId, why: outcome.why }, "cluster report ignored");
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
