import { rmSync } from "node:fs";
import { join } from "node:path";
import type {
  CommandPayload,
  CommandResult,
  NodePhaseReport,
  NodePhaseStatus,
  NodeReportFrame,
  NodeRole,
  PhaseStatusRecord,
} from "@keelson/protocol";
import type { Logger } from "pino";
import type { CertificateRequest, SignedCertificatePem } from "../link/client.ts";
import type { NodeConfig } from "../phases/config.ts";
import { certRequests } from "../phases/impl/certs.ts";
import {
  ALL_PHASES,
  cleanNode,
  type KubeApi,
  type Phase,
  PhaseEngine,
  Reconciler,
  type SignCsr,
} from "../phases/index.ts";
import { nodePaths } from "../phases/paths.ts";
import type { ServiceManager } from "../services/types.ts";
import {
  clearDesiredState,
  DESIRED_STATE_FILE,
  type DesiredState,
  loadDesiredState,
  saveDesiredState,
} from "./desired-state.ts";
import { etcdHealthTarget } from "./etcd-health.ts";
import { type EtcdCheck, EtcdHealthWatch, type EtcdSubject } from "./etcd-watch.ts";
import { ImageArchiveError, missingImages, stageImageArchive } from "./image-archives.ts";
import { buildNodeConfig, type NodeTuning } from "./node-config.ts";
import { NodePackages } from "./node-packages.ts";
import { CoalescingReporter } from "./reporter.ts";

/**
 * The node controller: the agent's side of cluster membership. `node.join` becomes the desired
 * state (persisted, so a restart resumes), which drives the phase engine through the reconcile
 * loop; every phase or node-status change goes to the control plane as a coalesced
 * `node.report` (and one after every reconnect). `node.leave` drains, stops the phases with the
 * detach intent (a master leaves etcd there, through the other members), cleans what the phases
 * wrote and forgets the membership.
 *
 * Over 400 lines on purpose, for now: join, leave, restart, upgrade and resume are steps of one
 * state machine over one `Running` value, serialised by one queue; each must see the others'
 * effects. The report coalescing (reporter.ts) and packages (node-packages.ts) already left;
 * restart/upgrade are the next to go, once they take the running state as an argument.
 */

export const PHASE_STATE_FILE = "phases.json";

/** What the controller needs of the link (LinkClient has it; tests pass a fake). */
export interface NodeLink {
  sendNodeReport(report: Omit<NodeReportFrame, "type">): boolean;
  signCertificate(request: CertificateRequest, options?: { signal?: AbortSignal }): Promise<SignedCertificatePem>;
}

/** The host as it is now: a join records its name and address for as long as it is a member. */
export interface HostIdentity {
  hostId: string;
  hostname: string;
  primaryIp: string;
}

export interface NodeControllerOptions {
  stateDir: string;
  /** The host's own node package (KEELSON_NODE_PACKAGE), for clusters the control plane serves none to. */
  nodePackage: string;
  /** The URL of the control plane linked to now, which the node package URLs of node.join/node.upgrade are relative to. */
  controlPlane?: () => string;
  /** Package downloads with the control plane's trust (link/trust.ts). */
  fetch?: typeof fetch;
  hostRoot: string;
  host: () => HostIdentity;
  link: NodeLink;
  /** Made on first need (a resumed or new membership): hosts in no cluster never start one. */
  services: () => Promise<ServiceManager>;
  log: Logger;
  tuning?: Partial<NodeTuning>;
  /** Where the node bouncer verifies bearer tokens (this agent's endpoint), once known. */
  bouncerVerifyUrl?: () => string | undefined;
  /** Default: every phase implementation. Tests swap in their own. */
  phases?: Phase[];
  /** Default: the cluster's API with the kubelet's credentials. */
  kubeApi?: (config: NodeConfig) => KubeApi | undefined;
  reportIntervalMs?: number;
  phaseTimeoutMs?: number;
  /** Told the node's config whenever membership or settings change (etcd backups). */
  backups?: { apply(config: NodeConfig | undefined): void };
  /** Masters' etcd member health for reports. Default: the node package's etcdctl (node/etcd-health.ts). */
  etcdCheck?: EtcdCheck;
}

export interface NodeSnapshot {
  clusterId: string | null;
  role: NodeRole | null;
  nodeStatus: NodePhaseStatus;
  phases: PhaseStatusRecord[];
}

export class NodeMembershipError extends Error {
  override name = "NodeMembershipError";
}

interface Running {
  desired: DesiredState;
  config: NodeConfig;
  engine: PhaseEngine;
  reconciler: Reconciler;
}

export class NodeController {
  private readonly desiredFile: string;
  private readonly phaseFile: string;
  private readonly reporter: CoalescingReporter;
  private readonly packages: NodePackages;
  private desired: DesiredState | undefined;
  private running: Running | undefined;
  /** join, leave and resume one at a time, in arrival order. */
  private queue: Promise<unknown> = Promise.resolve();
  private servicesPromise: Promise<ServiceManager> | undefined;
  private closed = false;
  private readonly etcdWatch: EtcdHealthWatch;

  constructor(private readonly options: NodeControllerOptions) {
    this.desiredFile = join(options.stateDir, DESIRED_STATE_FILE);
    this.phaseFile = join(options.stateDir, PHASE_STATE_FILE);
    this.desired = loadDesiredState(this.desiredFile);
    this.packages = new NodePackages({
      stateDir: options.stateDir,
      controlPlane: options.controlPlane ?? (() => ""),
      ...(options.fetch ? { fetch: options.fetch } : {}),
      hostPackage: options.nodePackage,
      log: options.log.child({ component: "node-packages" }),
    });
    this.reporter = new CoalescingReporter(
      () => this.sendReport(),
      options.reportIntervalMs ?? 200,
      (err) => options.log.warn({ err }, "building the node report failed"),
    );
    this.etcdWatch = new EtcdHealthWatch({
      subject: () => this.etcdSubject(),
      changed: () => this.reporter.changed(),
      check: options.etcdCheck,
    });
  }

  /** The cluster this host is a node of, as persisted. */
  get clusterId(): string | null {
    return this.desired?.join.clusterId ?? null;
  }

  /** For the host record: membership, node status and the phase list. */
  snapshot(): NodeSnapshot {
    if (!this.desired) return { clusterId: null, role: null, nodeStatus: "ok", phases: [] };
    const engine = this.running?.engine;
    return {
      clusterId: this.desired.join.clusterId,
      role: this.desired.join.role,
      nodeStatus: engine?.nodeStatus ?? "converging",
      phases: engine?.list() ?? [],
    };
  }

  /** After an agent start: a host that is a member runs its phases again (reusing certificates). */
  resume(): Promise<void> {
    return this.serial(async () => {
      const desired = this.desired;
      if (!desired || this.running) return;
      this.options.log.info({ clusterId: desired.join.clusterId, role: desired.join.role }, "resuming node");
      await this.startRunning(desired, this.options.tuning?.regenerateCerts ?? false);
    });
  }

  /** The link (re)connected: the control plane hears where the node stands. */
  connected(): void {
    void this.reporter.flush();
  }

  join(payload: CommandPayload<"node.join">): Promise<CommandResult<"node.join">> {
    return this.serial(async () => {
      const current = this.desired;
      if (current && current.join.clusterId !== payload.clusterId) {
        throw new NodeMembershipError(
          `this host is a node of cluster ${current.join.clusterId}; detach it before it joins ${payload.clusterId}`,
        );
      }
      if (current && current.join.role !== payload.role) {
        throw new NodeMembershipError(
          `this host is a ${current.join.role} of cluster ${current.join.clusterId}, not a ${payload.role}; detach it first`,
        );
      }
      // Installed before anything is saved: a package that cannot be had fails the join as it stands.
      await this.packages.ensure(payload.nodePackage);
      const host = this.options.host();
      const desired: DesiredState = {
        version: 1,
        join: payload,
        hostname: current?.hostname ?? host.hostname,
        primaryIp: current?.primaryIp ?? host.primaryIp,
        joinedAt: current?.joinedAt ?? new Date().toISOString(),
        ...(current?.command ? { command: current.command } : {}),
      };
      saveDesiredState(this.desiredFile, desired);
      this.desired = desired;
      if (!current) {
        this.options.log.info({ clusterId: payload.clusterId, role: payload.role }, "joining cluster");
        // A phase list of an earlier membership must not make this one look started.
        rmSync(this.phaseFile, { force: true });
        // New membership, new cluster CA: never reuse certificates an earlier one left behind.
        await this.startRunning(desired, true, true);
        return { accepted: true };
      }
      // The same join again (a control-plane restart) or one with news (more etcd members,
      // changed settings): keep going, and rebuild the engine only when its config changed
      // (or the loop stopped, as after a leave that failed).
      const running = this.running;
      const config = await this.configFor(desired);
      if (running?.reconciler.running && JSON.stringify(running.config) === JSON.stringify(config)) {
        running.desired = desired;
        running.reconciler.poke();
        void this.reporter.flush();
        return { accepted: true };
      }
      await this.stopRunning();
      await this.startRunning(desired, false);
      return { accepted: true };
    });
  }

  /**
   * New cluster settings (a cluster update): kept in the desired state, where the phases take
   * them from when they next run; what is scheduled from them (backups) follows at once.
   */
  settings(payload: CommandPayload<"node.settings">): Promise<CommandResult<"node.settings">> {
    return this.serial(async () => {
      const current = this.desired;
      if (!current || current.join.clusterId !== payload.clusterId) {
        throw new NodeMembershipError(`this host is not a node of cluster ${payload.clusterId}`);
      }
      const desired: DesiredState = { ...current, join: { ...current.join, settings: payload.settings } };
      saveDesiredState(this.desiredFile, desired);
      this.desired = desired;
      this.options.backups?.apply(await this.configFor(desired));
      return { applied: true };
    });
  }

  /**
   * A master sweeps its cluster's Nodes now (node.sweep). Not serialised with join/leave: it only
   * makes idempotent API calls, and a worker's join may be waiting for exactly this.
   */
  async sweep(payload: CommandPayload<"node.sweep">, signal?: AbortSignal): Promise<CommandResult<"node.sweep">> {
    if (this.desired?.join.clusterId !== payload.clusterId) {
      throw new NodeMembershipError(`this host is not a node of cluster ${payload.clusterId}`);
    }
    if (!this.running) throw new Error("the node's phases are not running yet: nothing to sweep with");
    return this.running.engine.sweep(signal);
  }

  /**
   * images.stage: the archive put among the host's user images, then imported now when the
   * node's runtime runs (the "load user images" phase imports it otherwise, when it starts), and
   * checked: every image the archive names must be in the runtime's list.
   */
  async stageImages(
    payload: CommandPayload<"images.stage">,
    signal?: AbortSignal,
  ): Promise<CommandResult<"images.stage">> {
    const controlPlane = this.options.controlPlane?.();
    if (!controlPlane) throw new ImageArchiveError("no control plane URL to download the image archive from");
    await stageImageArchive(payload, {
      dir: nodePaths(this.options.hostRoot).userImages,
      controlPlane,
      ...(this.options.fetch ? { fetch: this.options.fetch } : {}),
      ...(signal ? { signal } : {}),
    });
    const listed = await this.running?.engine.importImages(signal);
    if (listed === undefined) return { imported: false, listed: [] };
    const missing = missingImages(payload.images, listed);
    if (missing.length > 0) {
      throw new ImageArchiveError(`imported ${payload.name}.tar, but the runtime does not list ${missing.join(", ")}`);
    }
    return { imported: true, listed };
  }

  /** images.list: the runtime's image list; refused when no runtime runs here. */
  async listImages(signal?: AbortSignal): Promise<CommandResult<"images.list">> {
    const listed = await this.running?.engine.listImages(signal);
    if (listed === undefined) {
      throw new ImageArchiveError(
        "no container runtime runs on this host (it is in no cluster, or its runtime phase is not running)",
      );
    }
    return { listed };
  }

  leave(payload: CommandPayload<"node.leave">, signal?: AbortSignal): Promise<CommandResult<"node.leave">> {
    return this.serial(async () => {
      const current = this.desired;
      if (!current) {
        // Already out of every cluster (a leave re-sent after it finished): nothing left to do.
        await this.reporter.flush();
        return { clean: true };
      }
      if (current.join.clusterId !== payload.clusterId) {
        throw new NodeMembershipError(
          `this host is a node of cluster ${current.join.clusterId}, not of ${payload.clusterId}`,
        );
      }
      this.options.log.info({ clusterId: payload.clusterId, lastNode: payload.lastNode }, "leaving cluster");
      this.options.backups?.apply(undefined);
      const running = this.running ?? (await this.startEngine(current));
      this.running = running;
      const { engine, reconciler } = running;
      // Whatever the loop is doing (a start waiting on a service) is moot now.
      engine.abort();
      await reconciler.halt();
      const onAbort = () => engine.abort();
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        engine.setNodeStatus("converging");
        // Drain first (the stop-only phase), except on the cluster's last node: nowhere to go.
        await engine.stop({ intent: "detach", skipStopOnly: payload.lastNode });
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
      // A drain that could not finish does not keep the node in the cluster (its pods go with
      // it either way); any other phase that could not stop (etcd could not remove the
      // member, a service that will not die) does: the control plane may ask again.
      const stuck = engine.list().filter((p) => p.state === "failed" && p.id !== "drain-pods");
      if (stuck.length > 0) {
        engine.setNodeStatus("failed");
        await this.reporter.flush();
        const first = stuck[0] as PhaseStatusRecord;
        throw new Error(`cannot leave cluster ${payload.clusterId}: ${first.id} did not stop: ${first.lastError}`);
      }
      const drain = engine.list().find((p) => p.id === "drain-pods");
      if (drain?.state === "failed") {
        this.options.log.warn({ error: drain.lastError }, "drain failed; leaving the cluster anyway");
      }
      await cleanNode(engine.paths, await this.services());
      rmSync(this.phaseFile, { force: true });
      clearDesiredState(this.desiredFile);
      this.packages.prune([]);
      this.desired = undefined;
      this.running = undefined;
      engine.removeAllListeners();
      await this.reporter.flush();
      this.options.log.info({ clusterId: payload.clusterId }, "left cluster; node cleaned");
      return { clean: true };
    });
  }

  /**
   * Staggered restart: drain, stop every phase, start them again (certificates kept unless
   * asked). `converging` is reported before the answer, so the control plane never takes the
   * node's earlier `ok` for the end of this restart; the phases then report as they start.
   */
  restart(
    payload: CommandPayload<"node.restart">,
    signal?: AbortSignal,
    commandId?: string,
  ): Promise<CommandResult<"node.restart">> {
    return this.serial(async () => {
      const current = this.memberOf(payload.clusterId);
      this.options.log.info({ clusterId: payload.clusterId, command: commandId }, "restarting node phases");
      await this.restartPhases(current, payload.regenerateCerts, signal, commandId);
      return { accepted: true };
    });
  }

  /**
   * Cluster upgrade: the node package of the new version is installed while the old one still
   * runs (a package that cannot be had fails the upgrade with the node as it was), then the new
   * kube role version, settings and package become the desired state (persisted first, so an
   * agent restart resumes at the new version), and the phases restart as in `restart`, on the
   * new package's binaries.
   */
  upgrade(
    payload: CommandPayload<"node.upgrade">,
    signal?: AbortSignal,
    commandId?: string,
  ): Promise<CommandResult<"node.upgrade">> {
    return this.serial(async () => {
      const current = this.memberOf(payload.clusterId);
      await this.packages.ensure(payload.nodePackage, signal);
      const { nodePackage: _previous, ...join } = current.join;
      const desired: DesiredState = {
        ...current,
        join: {
          ...join,
          kubeRoleVersion: payload.kubeRoleVersion,
          settings: payload.settings,
          ...(payload.nodePackage ? { nodePackage: payload.nodePackage } : {}),
        },
      };
      saveDesiredState(this.desiredFile, desired);
      this.desired = desired;
      this.options.log.info(
        { clusterId: payload.clusterId, from: current.join.kubeRoleVersion, to: payload.kubeRoleVersion },
        "upgrading node",
      );
      await this.restartPhases(desired, false, signal, commandId);
      // The package before stays for a look back; older ones go.
      this.packages.prune([desired.join.nodePackage, current.join.nodePackage]);
      return { accepted: true };
    });
  }

  /**
   * Installs the node package of an upgrade ahead of it. Not queued behind other membership
   * work: it changes nothing the node runs, and installs of one package are shared, so the
   * upgrade that follows finds it in place.
   */
  async prefetch(
    payload: CommandPayload<"node.prefetch">,
    signal?: AbortSignal,
  ): Promise<CommandResult<"node.prefetch">> {
    this.memberOf(payload.clusterId);
    await this.packages.ensure(payload.nodePackage, signal);
    return { ready: true };
  }

  /** Stops managing (agent shutdown): the node's services keep running, like systemd units. */
  async close(): Promise<void> {
    this.closed = true;
    this.reporter.close();
    this.etcdWatch.close();
    await this.serial(() => this.stopRunning());
    (await this.servicesPromise?.catch(() => undefined))?.close();
  }

  // ---- internals -----------------------------------------------------------------------

  private memberOf(clusterId: string): DesiredState {
    const current = this.desired;
    if (!current || current.join.clusterId !== clusterId) {
      throw new NodeMembershipError(
        `this host is ${current ? `a node of cluster ${current.join.clusterId}` : "in no cluster"}, not of ${clusterId}`,
      );
    }
    return current;
  }

  /** Drain and stop every phase (intent stop), then start the reconcile loop again. */
  private async restartPhases(
    before: DesiredState,
    regenerateCerts: boolean,
    signal: AbortSignal | undefined,
    commandId: string | undefined,
  ): Promise<void> {
    const running = this.running ?? (await this.startEngine(before));
    this.running = running;
    const { engine, reconciler } = running;
    engine.abort();
    await reconciler.halt();
    // The command the node now works for is named in the same tick the node turns
    // `converging` (no report pairs it with the state from before), and kept for every report
    // from here on, also after an agent restart. Saved after the report goes out: a crash in
    // between interrupts the command, which the control plane then sends again under a new id.
    engine.setNodeStatus("converging");
    const { command: _before, ...rest } = before;
    const desired: DesiredState = commandId ? { ...rest, command: commandId } : rest;
    this.desired = desired;
    this.options.link.sendNodeReport({
      clusterId: desired.join.clusterId,
      report: engine.report(),
      apiResponding: false,
      ...(desired.command ? { command: desired.command } : {}),
    });
    saveDesiredState(this.desiredFile, desired);
    const onAbort = () => engine.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await engine.stop({ intent: "stop" });
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    engine.removeAllListeners();
    this.running = undefined;
    // A phase that would not stop is retried by the start (its start is idempotent); the
    // restart goes on either way, so the node does not stay stopped.
    await this.startRunning(desired, regenerateCerts);
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private services(): Promise<ServiceManager> {
    this.servicesPromise ??= this.options.services();
    return this.servicesPromise;
  }

  /** The node's config; its node package installed first if it is not (a state dir restored from a backup). */
  private async configFor(desired: DesiredState): Promise<NodeConfig> {
    const tuning = this.options.tuning;
    return buildNodeConfig(desired, {
      hostId: this.options.host().hostId,
      nodePackage: await this.packages.ensure(desired.join.nodePackage),
      hostRoot: this.options.hostRoot,
      bouncerVerifyUrl: this.options.bouncerVerifyUrl?.(),
      hostChecks: tuning?.hostChecks,
      timeouts: tuning?.timeouts,
    });
  }

  private async startEngine(desired: DesiredState): Promise<Running> {
    const config = await this.configFor(desired);
    const engine = new PhaseEngine({
      config,
      phases: this.options.phases ?? ALL_PHASES,
      stateFile: this.phaseFile,
      log: this.options.log.child({ component: "phases" }),
      services: await this.services(),
      signCsr: this.signCsr(config),
      kubeApi: this.options.kubeApi?.(config),
      phaseTimeoutMs: this.options.phaseTimeoutMs,
    });
    engine.on("change", () => this.reporter.changed());
    engine.on("node-status", () => this.reporter.changed());
    const reconciler = new Reconciler(
      engine,
      this.options.log.child({ component: "reconciler" }),
      this.options.tuning?.reconcile,
    );
    return { desired, config, engine, reconciler };
  }

  private async startRunning(desired: DesiredState, regenerateCerts: boolean, fresh = false): Promise<void> {
    if (this.closed) return;
    const running = await this.startEngine(desired);
    this.running = running;
    this.options.backups?.apply(running.config);
    if (fresh) {
      // The control plane sees the new membership converging at once, however fast the
      // phases then run (coalescing could otherwise fold it straight into ok).
      this.options.link.sendNodeReport({
        clusterId: desired.join.clusterId,
        report: running.engine.report(),
        apiResponding: false,
      });
    }
    running.reconciler.run({ regenerateCerts });
    this.reporter.changed();
  }

  private async stopRunning(): Promise<void> {
    const running = this.running;
    if (!running) return;
    running.engine.abort();
    await running.reconciler.halt();
    running.engine.removeAllListeners();
    this.running = undefined;
  }

  /** CSRs go to the control plane with the SANs the phase asked for, so it can check them. */
  private signCsr(config: NodeConfig): SignCsr {
    const requests = certRequests(config);
    return async (csrPem, profile, signal) => {
      const request = requests.find((r) => r.profile === profile);
      const signed = await this.options.link.signCertificate(
        { profile, csrPem, dnsNames: request?.dns ?? [], ipAddresses: request?.ips ?? [] },
        { signal },
      );
      return {
        certPem: signed.certPem,
        caPem: signed.caCertPem,
        ...(signed.serviceAccountKeyPem ? { serviceAccountKeyPem: signed.serviceAccountKeyPem } : {}),
        ...(signed.clusterSigning ? { clusterSigning: signed.clusterSigning } : {}),
      };
    };
  }

  private async sendReport(): Promise<boolean> {
    const desired = this.desired;
    const engine = this.running?.engine;
    if (!desired) {
      return this.options.link.sendNodeReport({
        clusterId: null,
        report: { status: "ok", phases: [] },
        apiResponding: false,
      });
    }
    const report: NodePhaseReport = engine ? engine.report() : { status: "converging", phases: [] };
    const etcd = await this.etcdWatch.forReport();
    return this.options.link.sendNodeReport({
      clusterId: desired.join.clusterId,
      report,
      apiResponding: desired.join.role === "master" && engine !== undefined && (await this.apiResponding()),
      ...(etcd ? { etcd } : {}),
      ...(desired.command ? { command: desired.command } : {}),
    });
  }

  /** A master whose start-etcd phase runs reports its etcd; the run is that phase's start time. */
  private etcdSubject(): EtcdSubject | undefined {
    const running = this.running;
    if (this.closed || !running || this.desired?.join.role !== "master") return undefined;
    const phase = running.engine.list().find((p) => p.id === "start-etcd");
    if (phase?.state !== "running") return undefined;
    return { run: `${phase.startedAt ?? ""}`, target: etcdHealthTarget(running.config) };
  }

  /** The API server on this master answers its health check (its service probe). */
  private async apiResponding(): Promise<boolean> {
    try {
      const status = await (await this.services()).status("kube-apiserver");
      return status.state === "running";
    } catch {
      return false;
    }
  }
}
