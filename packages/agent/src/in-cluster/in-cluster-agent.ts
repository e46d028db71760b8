import { AGENT_CAPABILITIES, CloseCode, clipText, IN_CLUSTER_IDENTITY_SECRET } from "@keelson/protocol";
import type { Logger } from "pino";
import type { Agent } from "../agent.ts";
import type { LinkClient } from "../link/index.ts";
import type { ControlPlaneTrust } from "../link/trust.ts";
import type { HostIdentity } from "../registration.ts";
import { AUTH_EXIT_CODE } from "../upgrade/ipc.ts";
import { AGENT_VERSION } from "../version.ts";
import { type ClusterReport, type InClusterApi, inClusterCredentials, readCluster } from "./cluster-reading.ts";
import type { IdentitySecret } from "./identity-secret.ts";

/** A call to the cluster's API that hangs must not hold the next report back for long. */
export const IN_CLUSTER_API_TIMEOUT_MS = 10_000;

/**
 * The agent of an external cluster (KEELSON_AGENT_MODE=in-cluster), run by the cluster's
 * deployment YAML as a pod: registered with the YAML's join token like a host agent, linked to
 * the control plane like any agent, and nothing else of a host agent: no node phases, no local
 * API, no self-upgrade (a new version comes with a new manifest). It reads the cluster's API
 * with the pod's service account (cluster-reading.ts) and sends a cluster.report after every
 * welcome and every KEELSON_AGENT_CLUSTER_REPORT_MS. An identity not kept in its Secret
 * (identity-secret.ts) is tried again before each report, and is the report's error until kept.
 */
export class InClusterAgent {
  private readonly link: LinkClient;
  private readonly log: Logger;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly agent: Agent,
    private readonly identity: HostIdentity,
    trust: ControlPlaneTrust,
    private readonly api: InClusterApi,
    private readonly kept: IdentitySecret,
  ) {
    const hostId = identity.hostId;
    this.log = agent.log.child({ hostId, mode: "in-cluster" });
    this.link = agent.openLink(identity, trust, {
      hello: () => agent.hello(hostId, "running"),
      // ping alone: every node command is unknown here, and the control plane sends none to a host in no cluster.
      handlers: { ping: async () => ({ at: new Date().toISOString() }) },
      capabilities: [AGENT_CAPABILITIES.clusterReport],
    });
    this.link.on("connected", () => this.report());
    this.link.on("disconnected", (info) => this.log.warn(info, "link to the control plane lost"));
    this.link.on("fatal", (info) => {
      if (info.code === CloseCode.UNAUTHORIZED) this.explainRefusedIdentity();
      this.log.fatal(
        { code: info.code, codeName: info.codeName, reason: info.reason },
        `the control plane refused this agent (${info.codeName}: ${info.reason}); exiting`,
      );
      void agent.stop("refused by the control plane", AUTH_EXIT_CODE);
    });
  }

  async start(): Promise<void> {
    const { settings } = this.agent;
    this.log.info(
      { api: inClusterCredentials(this.api).url, version: AGENT_VERSION, everyMs: settings.clusterReportMs },
      "keelson-agent started in in-cluster mode",
    );
    this.link.start();
    this.timer = setInterval(() => this.report(), settings.clusterReportMs);
  }

  async stop(reason: string, code: number): Promise<void> {
    this.log.info({ reason, exitCode: code }, "stopping");
    this.stopped = true;
    clearInterval(this.timer);
    await this.reading;
    await this.link.stop({ graceMs: 0 });
  }

  /**
   * An identity the control plane does not know (deleted with the cluster's registration, or its
   * host deleted) is refused at every start of the container, which Kubernetes restarts: this
   * says where that identity lives and what ends the loop, instead of a bare exit 77.
   */
  private explainRefusedIdentity(): void {
    const restored = this.kept.restoredHostId === this.identity.hostId;
    this.log.error(
      { hostId: this.identity.hostId, restoredFromSecret: restored, secret: IN_CLUSTER_IDENTITY_SECRET },
      `the identity this agent links with (host ${this.identity.hostId}${restored ? `, restored from the Secret ${IN_CLUSTER_IDENTITY_SECRET}` : ""}) ` +
        "is unknown to the control plane: the cluster was deregistered or its host deleted. Register the cluster again and " +
        "apply its new deployment YAML: its pod registers with the new join token and replaces the identity in the Secret " +
        `${IN_CLUSTER_IDENTITY_SECRET} (no need to delete it)`,
    );
  }

  /** Reads the cluster and sends what it read; one reading at a time (a slow API skips ticks). */
  private report(): void {
    if (this.reading || this.stopped) return;
    this.reading = this.readAndSend().finally(() => {
      this.reading = undefined;
    });
  }

  private async readAndSend(): Promise<void> {
    if (this.kept.problem) await this.kept.keep(this.identity);
    const report: ClusterReport = await readCluster(inClusterCredentials(this.api), IN_CLUSTER_API_TIMEOUT_MS);
    if (report.error) this.log.warn({ error: report.error }, "reading the cluster's API failed");
    const { problem } = this.kept;
    if (problem) report.error = clipText(report.error ? `${problem}; ${report.error}` : problem);
    if (!this.stopped && !this.link.sendClusterReport(report)) {
      this.log.debug("cluster report not sent: no link that takes it; sent after the next welcome");
    }
  }
}
