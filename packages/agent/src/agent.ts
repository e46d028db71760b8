import {
  type AgentStatus,
  buildHostRecord,
  clipText,
  type HelloPayload,
  type HostFacts,
  validateUpgradeRequest,
} from "@keelson/protocol";
import pino, { type Logger } from "pino";
import { EtcdBackups } from "./backups/index.ts";
import { FactsMonitor } from "./facts.ts";
import { IdentitySecret } from "./in-cluster/identity-secret.ts";
import { IN_CLUSTER_API_TIMEOUT_MS, InClusterAgent } from "./in-cluster/in-cluster-agent.ts";
import { ControlPlanes } from "./link/control-planes.ts";
import { LinkClient, type LinkClientOptions } from "./link/index.ts";
import { changePins } from "./link/pin-change.ts";
import { ControlPlanePins } from "./link/pins.ts";
import { ProxyRoutes } from "./link/proxy.ts";
import { type ControlPlaneTrust, establishTrust, TrustError } from "./link/trust.ts";
import { AgentMetrics } from "./local-api/metrics.ts";
import { buildLocalApi } from "./local-api/server.ts";
import { TokenCheck } from "./local-api/token-check.ts";
import { bouncerVerifyUrl, NodeController, nodeTuningOf, registerBouncerEndpoint } from "./node/index.ts";
import { ensureRegistered, RegistrationError } from "./registration.ts";
import { createServiceManager } from "./services/index.ts";
import type { AgentSettings } from "./settings.ts";
import { StateDir } from "./state-dir.ts";
import { StateDirSpace } from "./state-space.ts";
import { AUTH_EXIT_CODE, CONFIG_EXIT_CODE, notifyReady, RESTART_EXIT_CODE } from "./upgrade/ipc.ts";
import { Upgrader } from "./upgrade/upgrader.ts";
import { AGENT_VERSION } from "./version.ts";

/** Why `start()` gave up, and the exit code that tells the launcher and systemd. */
export class AgentStartError extends Error {
  override name = "AgentStartError";
  constructor(
    message: string,
    readonly exitCode: number,
    /** The control plane's error code of a refused registration (join_token_used, …). */
    readonly code?: string,
  ) {
    super(message);
  }
}

/** A stop that hangs (a stuck download, a peer that never closes) must not keep the host's agent from restarting. */
const STOP_GIVE_UP_MS = 20_000;
/**
 * A resume that fails (its node package gone from the state dir while the control plane is
 * unreachable) is tried again; the node's services keep running meanwhile, unwatched.
 */
const RESUME_RETRY_MS = 15_000;

/**
 * keelson-agent: registration, host facts, the link, the local API, the node and the
 * self-upgrade, wired together; in in-cluster mode, registration and the link alone, reporting an
 * external cluster (in-cluster/). Over 400 lines because `Running` is the host agent's whole
 * assembly, kept beside the start and stop sequence it belongs to. `start()` brings it up; `stopped` settles with the exit code
 * the process should end with: 0 stopped, RESTART_EXIT_CODE start me again (new version),
 * AUTH_EXIT_CODE refused by the control plane (upgrade/ipc.ts). main.ts owns the process.
 */
export class Agent {
  readonly stateDir: StateDir;
  readonly facts: FactsMonitor;
  /** KEELSON_CONTROL_PLANE's URLs and the one linked to now (the link moves on when one fails). */
  readonly planes: ControlPlanes;
  /** The address each control-plane name is reached at, where one is pinned (link/pins.ts). */
  readonly pins: ControlPlanePins;
  /** Settles with the exit code once the agent has stopped, by `stop()` or by itself. */
  readonly stopped: Promise<number>;
  readonly log: Logger;
  private readonly starting = new AbortController();
  private resolveStopped!: (code: number) => void;
  private stopping: Promise<number> | undefined;
  private running: Running | InClusterAgent | undefined;

  constructor(
    readonly settings: AgentSettings,
    options: { log?: Logger } = {},
  ) {
    this.log = options.log ?? pino({ name: "keelson-agent", level: settings.logLevel });
    this.stateDir = new StateDir(settings.stateDir).ensure();
    this.planes = new ControlPlanes(settings.controlPlanes);
    this.pins = new ControlPlanePins(this.stateDir, settings.controlPlanePins);
    this.facts = new FactsMonitor({
      hostname: settings.hostname,
      primaryIp: settings.primaryIp,
      agentVersion: AGENT_VERSION,
    });
    this.stopped = new Promise((resolve) => {
      this.resolveStopped = resolve;
    });
  }

  /** Registers (retrying while the control plane is unreachable), then starts every part. */
  async start(): Promise<void> {
    const { inCluster } = this.settings;
    const localToken = inCluster ? "" : this.stateDir.ensureLocalApiToken();
    const first = (await this.facts.collect()).facts;
    const { settings } = this;
    let identity: Awaited<ReturnType<typeof ensureRegistered>>;
    let trust: ControlPlaneTrust;
    // In a pod the state dir is an emptyDir: the identity is kept in a Secret too (identity-secret.ts).
    const kept = inCluster ? new IdentitySecret(inCluster, this.log, IN_CLUSTER_API_TIMEOUT_MS) : undefined;
    try {
      // Before the join token or the credential goes anywhere: whom to trust.
      trust = await establishTrust({
        controlPlane: this.planes.current,
        caHash: settings.caHash,
        stateDir: settings.stateDir,
        log: this.log,
        signal: this.starting.signal,
        backoff: this.backoff(),
        proxy: new ProxyRoutes({
          httpsProxy: settings.httpsProxy,
          httpProxy: settings.httpProxy,
          noProxy: settings.noProxy,
        }),
        pins: this.pins,
      });
      await kept?.restore(this.stateDir);
      identity = await ensureRegistered({
        fetch: trust.fetch,
        controlPlane: this.planes,
        stateDir: settings.stateDir,
        joinToken: settings.joinToken,
        hostname: first.hostname,
        primaryIp: first.primaryIp,
        agentVersion: AGENT_VERSION,
        cloudInstanceId: settings.cloudInstanceId,
        log: this.log,
        signal: this.starting.signal,
        backoff: this.backoff(),
      });
    } catch (err) {
      if (this.starting.signal.aborted) {
        this.log.info({ reason: (this.starting.signal.reason as Error).message }, "stopped before registering");
        this.resolveStopped(0);
        return;
      }
      if (err instanceof TrustError) {
        throw new AgentStartError(`cannot start: ${err.message}`, CONFIG_EXIT_CODE, "ca_trust_refused");
      }
      if (err instanceof RegistrationError) {
        const code = err.code === "join_token_missing" ? CONFIG_EXIT_CODE : AUTH_EXIT_CODE;
        throw new AgentStartError(`cannot start: ${err.message}`, code, err.code);
      }
      throw err;
    }
    await kept?.keep(identity);
    this.running =
      inCluster && kept
        ? new InClusterAgent(this, identity, trust, inCluster, kept)
        : new Running(this, identity, localToken, trust);
    if (this.starting.signal.aborted) {
      await this.stop((this.starting.signal.reason as Error).message);
      return;
    }
    await this.running.start();
  }

  /** Stops every part; the node's services keep running (like systemd units). Idempotent. */
  stop(reason: string, code = 0): Promise<number> {
    if (!this.running) {
      // Registration may still be retrying an unreachable control plane: abort it.
      this.starting.abort(new Error(reason));
      return this.stopped;
    }
    this.stopping ??= this.running.stop(reason, code).then(
      () => code,
      (err: unknown) => {
        this.log.error({ err }, "stopping failed");
        return code;
      },
    );
    const giveUp = new Promise<number>((resolve) =>
      setTimeout(() => {
        this.log.error("graceful stop took too long; exiting");
        resolve(code);
      }, STOP_GIVE_UP_MS).unref(),
    );
    void Promise.race([this.stopping, giveUp]).then((exit) => this.resolveStopped(exit));
    return this.stopped;
  }

  /** The link to the control plane as both modes open it: the replicas, the trusted CA, the credential. */
  openLink(
    identity: { hostId: string; credential: string },
    trust: ControlPlaneTrust,
    parts: Pick<LinkClientOptions, "hello" | "handlers" | "capabilities">,
  ): LinkClient {
    return new LinkClient({
      url: this.planes,
      connection: (url) => trust.connectOptions(url),
      hostId: identity.hostId,
      credential: identity.credential,
      stateDir: this.settings.stateDir,
      // Not a host-id child: the link's own lines already carry the host id where it matters.
      log: this.log.child({ component: "link" }),
      backoff: this.backoff(),
      ...parts,
    });
  }

  /** The hello of this agent's link: the host as it is now, and the agent's own status. */
  hello(hostId: string, agentStatus: AgentStatus, agentError?: string): HelloPayload {
    const { current } = this.facts;
    return {
      hostId,
      agentVersion: AGENT_VERSION,
      hostname: current.hostname,
      primaryIp: current.primaryIp,
      facts: current,
      agentStatus,
      ...(agentError ? { agentError: clipText(agentError) } : {}),
    };
  }

  backoff(): { initialMs: number; maxMs: number } {
    return { initialMs: this.settings.reconnectInitialMs, maxMs: this.settings.reconnectMaxMs };
  }
}

/** The parts of a registered agent, and their wiring. */
class Running {
  readonly log: Logger;
  private linkUp = false;
  private lastSeen: string | null = null;
  private apiListening = false;
  private readySent = false;
  private bouncerUrl: string | undefined;
  private readonly upgrader: Upgrader;
  private readonly link: LinkClient;
  private readonly backups: EtcdBackups;
  private readonly node: NodeController;
  private readonly api: ReturnType<typeof buildLocalApi>;
  private readonly bouncerPath: string;
  private readonly space: StateDirSpace;
  private readonly metrics: AgentMetrics;

  constructor(
    private readonly agent: Agent,
    identity: { hostId: string; credential: string },
    localToken: string,
    trust: ControlPlaneTrust,
  ) {
    const { settings, facts } = agent;
    const hostId = identity.hostId;
    const log = agent.log.child({ hostId });
    this.log = log;
    this.metrics = new AgentMetrics(() => this.node.snapshot());
    // A full state dir is told to the control plane with the facts, at once when a write is
    // refused; the link, the local API and the node's phases carry on.
    this.space = new StateDirSpace(settings.stateDir, () => {
      log.error({ stateDir: settings.stateDir }, "the state dir is full; state files keep their last content");
      this.sendFactsIfChanged();
    });
    facts.conditions = () => this.space.check();
    this.upgrader = new Upgrader({
      stateDir: agent.stateDir,
      currentVersion: AGENT_VERSION,
      fetch: trust.fetch,
      log,
      onChange: ({ status, error }) => {
        this.link.sendStatus({
          agentStatus: status,
          agentVersion: AGENT_VERSION,
          ...(error ? { agentError: clipText(error) } : {}),
        });
      },
      restart: async (version) => {
        await agent.stop(`restarting on version ${version}`, RESTART_EXIT_CODE);
      },
    });
    this.link = agent.openLink(identity, trust, {
      hello: () => agent.hello(hostId, this.upgrader.status, this.upgrader.error),
      handlers: {
        ping: async () => ({ at: new Date().toISOString() }),
        // Answers at once; the upgrade continues in the background and reports through status.
        "agent.upgrade": async (payload) => this.upgrader.start(validateUpgradeRequest(payload)),
        // Accepted at once (the phases run on and report through node.report); leave answers when clean.
        "node.join": async (payload) => this.node.join(payload),
        "node.leave": async (payload, ctx) => this.node.leave(payload, ctx.signal),
        "node.settings": async (payload) => this.node.settings(payload),
        "node.restart": async (payload, ctx) => this.node.restart(payload, ctx.signal, ctx.id),
        "node.upgrade": async (payload, ctx) => this.node.upgrade(payload, ctx.signal, ctx.id),
        "node.prefetch": async (payload, ctx) => this.node.prefetch(payload, ctx.signal),
        "node.sweep": async (payload, ctx) => this.node.sweep(payload, ctx.signal),
        "images.stage": async (payload, ctx) => this.node.stageImages(payload, ctx.signal),
        "images.list": async (_payload, ctx) => this.node.listImages(ctx.signal),
        "control-plane.pins": async (payload, ctx) => {
          const result = await changePins(agent.pins, trust, settings.controlPlanes, payload, ctx.signal);
          if (JSON.stringify(result.pins) !== JSON.stringify(result.previous)) {
            log.info(result, "control-plane pins changed; linking over them");
            // Now rather than when the link next drops: the new address is proven at once, and the old one
            // can be switched off once every host answered. After this answer has gone out on the link.
            setImmediate(() => this.link.relink("the control-plane pins changed"));
          }
          return result;
        },
      },
    });
    this.backups = new EtcdBackups({
      log: log.child({ component: "backups" }),
      send: (report) => this.link.sendBackupReport(report),
      minuteMs: settings.backupMinuteMs,
    });
    this.node = new NodeController({
      stateDir: settings.stateDir,
      nodePackage: settings.nodePackage,
      controlPlane: () => agent.planes.current,
      fetch: trust.fetch,
      hostRoot: settings.hostRoot,
      host: () => ({ hostId, hostname: facts.current.hostname, primaryIp: facts.current.primaryIp }),
      link: this.link,
      services: async () =>
        this.metrics.watch(
          await createServiceManager({
            hostRoot: settings.hostRoot,
            override: settings.serviceManager,
            log: log.child({ component: "services" }),
          }),
        ),
      log: log.child({ component: "node" }),
      tuning: nodeTuningOf(settings),
      bouncerVerifyUrl: () => this.bouncerUrl,
      backups: this.backups,
    });
    this.link.on("connected", () => {
      // A CA rotation under way: the bundle, read over the verified link's server, may name a next CA.
      void trust.refresh(agent.planes.current, settings.stateDir, log);
      this.linkUp = true;
      this.metrics.linkConnected();
      this.node.connected();
      this.backups.connected();
      this.signalReady();
    });
    this.link.on("disconnected", (info) => {
      this.linkUp = false;
      this.metrics.linkDisconnected();
      this.lastSeen = new Date().toISOString();
      log.warn(info, "link to the control plane lost");
    });
    this.link.on("fatal", (info) => {
      log.fatal(
        { code: info.code, codeName: info.codeName, reason: info.reason },
        `the control plane refused this agent (${info.codeName}: ${info.reason}); a restart cannot fix that, exiting`,
      );
      void agent.stop("refused by the control plane", AUTH_EXIT_CODE);
    });
    this.api = buildLocalApi({
      hostId,
      tokens: new TokenCheck({ localToken, verify: (token) => this.link.verifyProjectToken(token) }),
      hostRecord: () => {
        const membership = this.node.snapshot();
        return buildHostRecord({
          id: hostId,
          facts: facts.current,
          responding: this.linkUp,
          lastSeen: this.lastSeen,
          agentVersion: AGENT_VERSION,
          agentStatus: this.upgrader.status,
          agentError: this.upgrader.error ?? null,
          roles: [],
          nodeStatus: membership.nodeStatus,
          clusterUuid: membership.clusterId,
          phases: membership.phases,
        });
      },
      upgrade: (body) => this.upgrader.start(validateUpgradeRequest(body)),
      log: log.child({ component: "local-api" }),
      metrics: this.metrics,
    });
    this.bouncerPath = registerBouncerEndpoint(this.api, {
      stateDir: agent.stateDir,
      verify: (token) => this.link.verifyClusterToken(token),
    }).path;
  }

  async start(): Promise<void> {
    const { settings, facts } = this.agent;
    const { host, port } = settings.listen;
    try {
      await this.api.listen({ host, port });
    } catch (err) {
      throw new AgentStartError(`cannot listen on ${host}:${port}: ${(err as Error).message}`, 1);
    }
    this.apiListening = true;
    const bound = this.api.server.address();
    this.bouncerUrl = bouncerVerifyUrl(
      { host, port: typeof bound === "object" && bound ? bound.port : port },
      this.bouncerPath,
    );
    this.log.info(
      { listen: `${host}:${port}`, version: AGENT_VERSION, stateDir: settings.stateDir },
      "keelson-agent started",
    );
    facts.start(
      settings.factsIntervalMs,
      (changed) => this.factsChanged(changed),
      (err) => this.log.warn({ err }, "collecting host facts failed"),
    );
    this.link.start();
    // A host that is a node of a cluster keeps running its phases across agent restarts.
    this.resumeNode();
  }

  async stop(reason: string, code: number): Promise<void> {
    this.log.info({ reason, exitCode: code }, "stopping");
    this.agent.facts.stop();
    this.space.close();
    await this.upgrader.abort();
    // A join or leave still running gets the link's grace period, then its abort signal.
    await this.link.stop({ graceMs: 5_000 });
    // The node's services keep running (like systemd units); the next start picks them up.
    await this.node.close();
    await this.backups.close();
    await this.api.close();
  }

  private factsChanged(changed: HostFacts): void {
    this.log.info({ conditions: changed.conditions?.map((c) => c.code) ?? [] }, "host facts changed");
    this.link.sendFacts(changed);
  }

  /** Collects the facts now rather than at the next tick (a condition just appeared). */
  private sendFactsIfChanged(): void {
    this.agent.facts.collect().then(
      ({ facts, changed }) => changed && this.factsChanged(facts),
      (err: unknown) => this.log.warn({ err }, "collecting host facts failed"),
    );
  }

  private resumeNode(): void {
    this.node.resume().catch((err) => {
      this.log.error({ err, retryInMs: RESUME_RETRY_MS }, "resuming the node failed; trying again");
      setTimeout(() => this.resumeNode(), RESUME_RETRY_MS).unref();
    });
  }

  /** The launcher keeps a freshly upgraded version only once it is up: API listening, link welcomed. */
  private signalReady(): void {
    if (this.readySent || !this.apiListening || !this.linkUp) return;
    this.readySent = true;
    notifyReady(AGENT_VERSION);
  }
}
