import { type ConnectionOptions, type SecureContext, TLSSocket } from "node:tls";
import {
  AGENT_CAPABILITIES,
  type AgentFrame,
  Backoff,
  type ClientOptions,
  CONTROL_CAPABILITIES,
  type CommandFrame,
  type ControlFrame,
  ControlPlanes,
  encodeFrame,
  FATAL_CLOSE_CODES,
  type HostFacts,
  isCertificateError,
  type NodePhaseStatus,
  type PhaseId,
  type PhaseStatusRecord,
  PROTOCOL_VERSION,
  parseControlFrame,
  strangerPin,
  WebSocket,
} from "./deps.ts";
import { type SimMembership, simPhases, simReport } from "./node.ts";

export interface SimBehaviour {
  /** Delay before answering a command. */
  latencyMs: number;
  /** Probability (0..1) that a command is answered with ok: false. */
  failureRate: number;
  random: () => number;
  reconnect: boolean;
  /** Time from `node.join` until the node reports its phases running (or failed). */
  phaseTimeMs: number;
  /** The phase an agent fails at (only when the node's role runs it); undefined: none. */
  failPhase?: PhaseId | ((hostname: string) => PhaseId | undefined);
}

export interface SimAgentInit {
  index: number;
  hostname: string;
  hostId: string;
  credential: string;
  /**
   * The link URL, or several replicas' (KEELSON_CONTROL_PLANE's list): like the real agent
   * (its ControlPlanes), the agent starts at a random one and moves to the next whenever an
   * attempt fails or a link ends.
   */
  linkUrl: string | readonly string[];
  /** A wss link's trust, one context shared by the fleet (sim/trust.ts); undefined: ws's defaults. */
  secureContext?: SecureContext | undefined;
  behaviour: SimBehaviour;
  /** Every agent of the simulator (this one included): a master's etcd view is the fleet's masters. */
  peers?: () => readonly SimAgent[];
  /**
   * Told of every welcome ("linked"), failed attempt ("connect failed: <why>") and link that
   * ended ("link dropped: <why>"), the why as specific as the socket says it (an errno code,
   * the HTTP status, the close code and reason): a bench tallies them to see why links fail.
   */
  onLinkEvent?: (event: string) => void;
}

/** What a simulated master says about etcd, as node/etcd-health.ts makes a real one say it. */
export interface SimEtcdHealth {
  members: number;
  healthy: number;
}

/** How one socket ended, for SimAgentInit.onLinkEvent: the error if there was one, else the close code and reason. */
function linkEnd(linked: boolean, error: string | undefined, code: number, reason: string): string {
  const why = error ?? `close ${code}${reason ? ` ${reason}` : ""}`;
  return `${linked ? "link dropped" : "connect failed"}: ${why}`;
}

/** Answered command ids kept per agent, like the real agent's record (smaller: sims are many). */
const RECORD_LIMIT = 100;

/**
 * One simulated agent: one WebSocket speaking the real protocol (hello with facts, welcome,
 * command results, re-delivered ids answered from memory). `ws` answers the control plane's
 * pings by itself, as in the real agent.
 */
export class SimAgent {
  readonly index: number;
  readonly hostname: string;
  readonly hostId: string;
  readonly credential: string;
  agentVersion = "0.0.0-sim";
  connected = false;
  /** The TLS protocol of the current link (e.g. "TLSv1.3"); undefined on plain HTTP. */
  tlsProtocol: string | undefined;
  /** Why the last attempt that ended before a welcome failed (a socket error code, or the close code). */
  lastFailure: string | undefined;
  /** Set when the control plane refused this agent for good. */
  fatal: { code: number; reason: string } | undefined;
  commands = 0;
  failures = 0;
  connects = 0;
  private ws: WebSocket | undefined;
  private planes: ControlPlanes;
  private stopped = false;
  private readonly backoff = new Backoff({ initialMs: 200, maxMs: 30_000 });
  private readonly answered = new Map<string, AgentFrame>();
  private welcomeWaiters: ((ok: boolean) => void)[] = [];
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** The cluster this node belongs to, as the last accepted `node.join` said. */
  membership: SimMembership | undefined;
  nodeStatus: NodePhaseStatus = "ok";
  phases: PhaseStatusRecord[] = [];
  /** `node.report` frames sent. */
  reports = 0;
  /** `node.restart` / `node.upgrade` commands carried out (re-deliveries answered from the record not counted). */
  restarts = 0;
  upgrades = 0;
  /** The kube role version the last `node.upgrade` asked for. */
  kubeRoleVersion: string | undefined;
  /** `agent.upgrade` commands carried out. */
  agentUpgrades = 0;
  /** How long a simulated agent upgrade takes; tests may change it (a huge value: it never comes back). */
  upgradeTimeMs = 20;
  /** What the hello declares; undefined: none, like an agent older than the field. Tests may change it. */
  capabilities: string[] | undefined = Object.values(AGENT_CAPABILITIES);
  /** `node.sweep` commands this (master) agent answered. */
  sweeps = 0;
  /** Role versions whose node package this agent was asked to fetch ahead (`node.prefetch`). */
  prefetched: string[] = [];
  /**
   * The simulated runtime's image list: images.stage adds the names the archive carries (as
   * the control plane read them) when the host is a node, as the real agent's ctr import would.
   */
  images: string[] = [];
  /** Archives staged by images.stage, by name, with their sha256. */
  stagedImages = new Map<string, string>();
  /**
   * The control-plane pins control-plane.pins set, kept but not used: a simulated agent links
   * to its URL as it is and has no new address to check, so it takes every pin the real one's rules take.
   */
  pins: { name: string; ip: string }[] = [];
  /** Set: `node.prefetch` fails with this reason (the package cannot be had). */
  prefetchFailure: string | undefined;
  /** Set: the next agent upgrades fail with this reason (the agent keeps its version, like the real one). */
  upgradeFailure: string | undefined;
  /** This agent's phase time and failing phase; start as the behaviour says, tests may change them. */
  phaseTimeMs: number;
  failPhase: PhaseId | undefined;
  /**
   * Set: what this master reports as its etcd health instead of the fleet's view (tests make
   * etcd not whole with it). Undefined: members are the simulator's masters of the cluster,
   * healthy those whose start-etcd phase runs.
   */
  etcdOverride: SimEtcdHealth | undefined;
  /** False: reports carry no etcd health, like an agent older than the field. */
  reportsEtcd = true;
  /** The etcd health of the last report sent (undefined: it had none). */
  lastEtcd: SimEtcdHealth | undefined;
  /**
   * The node.restart / node.upgrade whose work the node's state shows (the last one taken up,
   * in this membership), named in reports once the welcome says the control plane takes it.
   */
  command: string | undefined;
  private namesCommands = false;
  /**
   * Test hook: runs when a node.restart / node.upgrade arrives, before the agent takes it up
   * (a report sent here is one that was on its way before the command began).
   */
  beforeRoll: (() => void) | undefined;
  /** How long after answering a node.restart / node.upgrade its phases start (a real agent's drain). */
  rollStartMs = 0;
  private convergeTimer: NodeJS.Timeout | undefined;

  constructor(private readonly init: SimAgentInit) {
    this.index = init.index;
    this.hostname = init.hostname;
    this.hostId = init.hostId;
    this.credential = init.credential;
    const urls = typeof init.linkUrl === "string" ? [init.linkUrl] : init.linkUrl;
    // One URL draws no random number: a test's seeded `random` keeps its sequence for failures.
    this.planes = new ControlPlanes(urls, urls.length > 1 ? init.behaviour.random : () => 0);
    this.phaseTimeMs = init.behaviour.phaseTimeMs;
    const fail = init.behaviour.failPhase;
    this.failPhase = typeof fail === "function" ? fail(init.hostname) : fail;
  }

  /**
   * Makes `phase` fail from now on (undefined: nothing fails) and, on a node of a cluster, runs
   * its phases again: how a test breaks a node, or fixes it and watches it recover.
   */
  setFailPhase(phase: PhaseId | undefined): void {
    this.failPhase = phase;
    if (this.membership) this.converge();
  }

  /** Sets (or clears) `etcdOverride`; a master that last reported etcd not whole reports the change. */
  setEtcdHealth(health: SimEtcdHealth | undefined): void {
    this.etcdOverride = health;
    this.etcdMayHaveChanged();
  }

  /**
   * The etcd field of this node's report: masters whose start-etcd phase runs (as the real
   * agent), from `etcdOverride` or the fleet's view of the cluster's masters.
   */
  etcdHealth(): SimEtcdHealth | undefined {
    const membership = this.membership;
    if (!this.reportsEtcd || membership?.role !== "master" || !this.etcdRunning()) return undefined;
    if (this.etcdOverride) return { ...this.etcdOverride };
    const masters = (this.init.peers?.() ?? [this]).filter(
      (a) => a.membership?.clusterId === membership.clusterId && a.membership.role === "master",
    );
    return { members: masters.length, healthy: masters.filter((a) => a.etcdRunning()).length };
  }

  private etcdRunning(): boolean {
    return this.phases.some((p) => p.id === "start-etcd" && p.state === "running");
  }

  /**
   * Like the real agent's re-check, which runs only while its last check found etcd not whole:
   * such a master reports again when what it would say changed.
   */
  private etcdMayHaveChanged(): void {
    const last = this.lastEtcd;
    if (!last || (last.members > 0 && last.healthy === last.members)) return;
    const now = this.etcdHealth();
    if (now && (now.members !== last.members || now.healthy !== last.healthy)) this.sendReport();
  }

  /**
   * Starts connecting; resolves true on the welcome, false once the agent gave up (refused for
   * good, stopped, or reconnecting disabled) or after `timeoutMs`. Failed attempts in between
   * are retried with backoff like a real agent.
   */
  connect(timeoutMs = 120_000): Promise<boolean> {
    const waiter = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.welcomeWaiters.push((ok) => {
        clearTimeout(timer);
        resolve(ok);
      });
    });
    if (!this.ws || this.ws.readyState === WebSocket.CLOSED) this.open();
    return waiter;
  }

  /** Closes with going-away and does not reconnect. */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.convergeTimer);
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => ws.terminate(), 2000);
      ws.once("close", () => {
        clearTimeout(timer);
        resolve();
      });
      ws.close(1001, "simulator stopping");
    });
  }

  /** Drops the socket without a close frame (a crashed host); reconnects if enabled. */
  kill(): void {
    this.ws?.terminate();
  }

  /**
   * Starts over at a random one of its URLs and drops the link (reconnecting there): how a
   * bench spreads a fleet that linked while only one replica ran, as if every replica had been
   * up when the agents started.
   */
  relinkAtRandom(): void {
    this.planes = new ControlPlanes(this.planes.urls, this.init.behaviour.random);
    this.kill();
  }

  /** The link URL this agent is linked to now (or tries next). */
  get linkUrl(): string {
    return this.planes.current;
  }

  send(frame: AgentFrame): boolean {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(encodeFrame(frame));
    return true;
  }

  facts(): HostFacts {
    const i = this.index;
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    return {
      hostname: this.hostname,
      os: {
        platform: "linux",
        family: "debian",
        distro: "Ubuntu",
        release: "22.04",
        codename: "jammy",
        kernel: "6.5.0-sim",
      },
      arch: "x64",
      cpu: { model: "Simulated CPU", count: 4 },
      memory: { totalBytes: 8 * 1024 ** 3 },
      disks: [{ name: "/dev/vda", type: "SSD", sizeBytes: 80 * 1024 ** 3 }],
      interfaces: [{ name: "eth0", mac: `02:00:00:${hex(i >> 16)}:${hex(i >> 8)}:${hex(i)}`, addresses: [ip] }],
      primaryIp: ip,
      agentVersion: this.agentVersion,
    };
  }

  private open(): void {
    const options: ClientOptions & ConnectionOptions = {
      headers: { authorization: `Bearer ${this.credential}`, "x-keelson-host-id": this.hostId },
      perMessageDeflate: false,
      handshakeTimeout: 30_000,
      // ws hands this to tls.connect, which then verifies against it (rejectUnauthorized stays on).
      ...(this.init.secureContext ? { secureContext: this.init.secureContext } : {}),
    };
    const ws = new WebSocket(this.planes.current, options);
    this.ws = ws;
    /** This socket's error (errno code or message), for the tally of why it closed. */
    let socketError: string | undefined;
    ws.on("upgrade", (res) => {
      this.tlsProtocol = res.socket instanceof TLSSocket ? (res.socket.getProtocol() ?? undefined) : undefined;
    });
    ws.on("open", () => {
      const facts = this.facts();
      ws.send(
        encodeFrame({
          type: "hello",
          protocolVersion: PROTOCOL_VERSION,
          ...(this.capabilities ? { capabilities: this.capabilities } : {}),
          hostId: this.hostId,
          agentVersion: this.agentVersion,
          hostname: this.hostname,
          primaryIp: facts.primaryIp,
          facts,
          agentStatus: "running",
        }),
      );
    });
    ws.on("message", (data) => {
      const parsed = parseControlFrame(data as Buffer);
      if (!parsed.ok) {
        ws.close(4400, parsed.error.message.slice(0, 120));
        return;
      }
      this.onFrame(parsed.frame);
    });
    ws.on("unexpected-response", (_req, res) => {
      const status = res.statusCode ?? 0;
      // As the real agent: a 503 (a replica stopping, draining or at its link ceiling) is retried
      // (on the next URL when there are several); any other refusal ends this agent.
      socketError = `HTTP ${status}`;
      if (status === 503) this.lastFailure = "HTTP 503";
      else this.fatal = { code: status, reason: `upgrade refused with HTTP ${status}` };
      res.resume();
      ws.terminate();
    });
    ws.on("error", (err) => {
      // A certificate the trust refuses ends this agent (the real one logs it and retries): a
      // test or bench sees the refusal at once, never a fleet that quietly fails to link.
      if (isCertificateError(err)) this.fatal = { code: 0, reason: `TLS: ${err.message}` };
      this.lastFailure = (err as NodeJS.ErrnoException).code ?? err.message;
      socketError ??= this.lastFailure;
      // The close event follows and decides what to do.
    });
    ws.on("close", (code, reason) => {
      if (this.ws !== ws) return;
      if (!this.stopped) this.init.onLinkEvent?.(linkEnd(this.connected, socketError, code, reason.toString()));
      if (!this.connected && !this.lastFailure) this.lastFailure = `closed ${code} before the welcome`;
      this.connected = false;
      this.backoff.disconnected();
      if (FATAL_CLOSE_CODES.has(code)) this.fatal = { code, reason: reason.toString() };
      if (this.stopped || this.fatal || !this.init.behaviour.reconnect) {
        this.settleWelcome(false);
        return;
      }
      if (this.planes.urls.length > 1) this.planes.next();
      this.reconnectTimer = setTimeout(() => this.open(), this.backoff.next());
    });
  }

  private onFrame(frame: ControlFrame): void {
    switch (frame.type) {
      case "welcome":
        this.connected = true;
        this.lastFailure = undefined;
        this.connects++;
        this.backoff.connected();
        this.init.onLinkEvent?.("linked");
        this.namesCommands = frame.capabilities?.includes(CONTROL_CAPABILITIES.reportCommand) ?? false;
        // Like the real agent: after every (re)connect the control plane hears where the node is.
        this.sendReport();
        this.settleWelcome(true);
        return;
      case "command":
        this.onCommand(frame);
        return;
      case "token.verified":
      case "cert.signed":
      case "cluster-token.verified":
        // The simulator signs nothing and runs no node bouncer, so it never asks.
        return;
      default: {
        const never: never = frame;
        throw new Error(`unhandled frame ${JSON.stringify(never)}`);
      }
    }
  }

  private onCommand(frame: CommandFrame): void {
    const recorded = this.answered.get(frame.id);
    if (recorded) {
      this.send(recorded);
      return;
    }
    this.commands++;
    const { latencyMs, failureRate, random } = this.init.behaviour;
    const answer = () => {
      const { result, afterAnswer } = this.resultFor(frame, random() < failureRate);
      this.answered.set(frame.id, result);
      if (this.answered.size > RECORD_LIMIT) this.answered.delete(this.answered.keys().next().value as string);
      this.send(result);
      afterAnswer?.();
    };
    if (latencyMs > 0) setTimeout(answer, latencyMs);
    else answer();
  }

  /** The result frame, and what to do once it is sent (a join's phases run after its answer). */
  private resultFor(frame: CommandFrame, fail: boolean): { result: AgentFrame; afterAnswer?: () => void } {
    const ok = (result: unknown) => ({ type: "result" as const, id: frame.id, ok: true as const, result });
    const refuse = (message: string) => ({
      result: { type: "result" as const, id: frame.id, ok: false as const, error: { code: "FAILED", message } },
    });
    if (fail) {
      this.failures++;
      return refuse("simulated failure");
    }
    switch (frame.name) {
      case "ping":
        return { result: ok({ at: new Date().toISOString() }) };
      case "agent.upgrade": {
        this.agentUpgrades++;
        return {
          result: ok({ accepted: true, status: "updating" }),
          afterAnswer: () => this.upgrade(frame.payload.version),
        };
      }
      case "node.join": {
        const { clusterId, role } = frame.payload;
        if (this.membership && this.membership.clusterId !== clusterId) {
          return refuse(`this host is a node of cluster ${this.membership.clusterId}; detach it first`);
        }
        if (this.membership) {
          // A join re-sent for the cluster the node is in (a control-plane restart): keep going.
          return { result: ok({ accepted: true }), afterAnswer: () => this.sendReport() };
        }
        this.membership = { clusterId, role };
        this.command = undefined;
        return { result: ok({ accepted: true }), afterAnswer: () => this.converge() };
      }
      case "node.leave": {
        if (this.membership && this.membership.clusterId !== frame.payload.clusterId) {
          return refuse(`this host is a node of cluster ${this.membership.clusterId}, not ${frame.payload.clusterId}`);
        }
        // Leaving a cluster it is not in (any more) is already done: answer clean again.
        clearTimeout(this.convergeTimer);
        this.membership = undefined;
        this.command = undefined;
        this.nodeStatus = "ok";
        this.phases = [];
        this.sendReport();
        return { result: ok({ clean: true }) };
      }
      case "node.restart":
      case "node.upgrade": {
        if (!this.membership || this.membership.clusterId !== frame.payload.clusterId) {
          return refuse(`this host is not a node of cluster ${frame.payload.clusterId}`);
        }
        this.beforeRoll?.();
        if (frame.name === "node.upgrade") {
          this.upgrades++;
          this.kubeRoleVersion = frame.payload.kubeRoleVersion;
        } else {
          this.restarts++;
        }
        // converge() reports `converging` at once (right after the answer, naming the command),
        // then `ok`: the control plane takes only reports naming its command as this restart's.
        const membership = this.membership;
        const begin = () => {
          if (this.membership !== membership) return;
          this.command = frame.id;
          this.converge();
        };
        return {
          result: ok({ accepted: true }),
          afterAnswer: () => (this.rollStartMs > 0 ? setTimeout(begin, this.rollStartMs) : begin()),
        };
      }
      case "node.prefetch": {
        if (!this.membership || this.membership.clusterId !== frame.payload.clusterId) {
          return refuse(`this host is not a node of cluster ${frame.payload.clusterId}`);
        }
        if (this.prefetchFailure) return refuse(this.prefetchFailure);
        this.prefetched.push(frame.payload.nodePackage.roleVersion);
        return { result: ok({ ready: true }) };
      }
      case "node.sweep": {
        if (!this.membership || this.membership.clusterId !== frame.payload.clusterId) {
          return refuse(`this host is not a node of cluster ${frame.payload.clusterId}`);
        }
        if (this.membership.role !== "master") return refuse("only a master sweeps its cluster's Nodes");
        // No Kubernetes API behind a simulated node: nothing to label or remove, only counted.
        this.sweeps += 1;
        return { result: ok({ labelled: [], removed: [] }) };
      }
      case "images.stage": {
        this.stagedImages.set(frame.payload.name, frame.payload.sha256);
        if (!this.membership) return { result: ok({ imported: false, listed: [] }) };
        this.images = [...new Set([...this.images, ...frame.payload.images])].sort();
        return { result: ok({ imported: true, listed: this.images }) };
      }
      case "control-plane.pins": {
        const stranger = strangerPin(frame.payload.pins, this.planes.urls);
        if (stranger) return refuse(stranger);
        const previous = this.pins;
        this.pins = frame.payload.pins;
        return { result: ok({ pins: this.pins, previous }) };
      }
      case "images.list":
        if (!this.membership) return refuse("no container runtime runs on this host (it is in no cluster)");
        return { result: ok({ listed: this.images }) };
      case "node.settings": {
        const membership = this.membership;
        if (!membership || membership.clusterId !== frame.payload.clusterId) {
          return refuse(`this host is not a node of cluster ${frame.payload.clusterId}`);
        }
        // A master with backups on answers like a real one after its first good run (cheaply: at once).
        const backups = membership.role === "master" && frame.payload.settings.isEtcdBackupEnabled === true;
        return {
          result: ok({ applied: true }),
          afterAnswer: backups
            ? () =>
                this.send({
                  type: "backup.report",
                  clusterId: membership.clusterId,
                  ok: true,
                  file: "/var/lib/keelson/etcd-backups/etcd-interval-sim.db",
                  at: new Date().toISOString(),
                })
            : undefined,
        };
      }
      default: {
        const never: never = frame;
        throw new Error(`unhandled command ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * Like the real agent's self-upgrade: status `updating` at once; after `upgradeTimeMs` either
   * `running` at the old version with the error (`upgradeFailure`), or a restart: the link
   * drops and comes back with a hello at the new version.
   */
  private upgrade(version: string): void {
    this.send({ type: "status", agentStatus: "updating", agentVersion: this.agentVersion });
    setTimeout(() => {
      if (this.stopped) return;
      if (this.upgradeFailure) {
        const agentError = `upgrade to ${version} failed: ${this.upgradeFailure}`;
        this.send({ type: "status", agentStatus: "running", agentVersion: this.agentVersion, agentError });
        return;
      }
      this.agentVersion = version;
      if (this.init.behaviour.reconnect) this.ws?.terminate();
      else this.send({ type: "status", agentStatus: "running", agentVersion: version });
    }, this.upgradeTimeMs);
  }

  /**
   * Runs the simulated phases: `converging` at once, then after `phaseTimeMs` all running
   * (`ok`), or with `failPhase` failed: `converging` with the failure, then `failed` (the
   * retry budget spent) after another `phaseTimeMs`.
   */
  private converge(): void {
    const membership = this.membership;
    if (!membership) return;
    clearTimeout(this.convergeTimer);
    this.setNode("converging", simPhases(membership.role, "converging", new Date()));
    const failing =
      this.failPhase && simPhases(membership.role, "ok", new Date()).some((p) => p.id === this.failPhase)
        ? this.failPhase
        : undefined;
    this.convergeTimer = setTimeout(() => {
      if (this.membership !== membership) return;
      if (!failing) {
        this.setNode("ok", simPhases(membership.role, "ok", new Date()));
        return;
      }
      const error = `simulated failure of phase ${failing}`;
      this.setNode("converging", simPhases(membership.role, { failed: failing, error }, new Date()));
      this.convergeTimer = setTimeout(() => {
        if (this.membership === membership) this.setNode("failed", this.phases);
      }, this.phaseTimeMs);
    }, this.phaseTimeMs);
  }

  private setNode(status: NodePhaseStatus, phases: PhaseStatusRecord[]): void {
    this.nodeStatus = status;
    this.phases = phases;
    this.sendReport();
    // The other masters of the cluster may see etcd change with this one.
    const membership = this.membership;
    if (membership?.role !== "master" || !this.init.peers) return;
    for (const peer of this.init.peers()) {
      if (peer !== this && peer.membership?.clusterId === membership.clusterId) peer.etcdMayHaveChanged();
    }
  }

  /** Sends a report of the node as it is now (tests: a report arriving at a chosen moment). */
  sendReport(): void {
    const report = simReport(this.membership, this.nodeStatus, this.phases);
    const etcd = this.etcdHealth();
    if (
      !this.send({
        type: "node.report",
        ...report,
        ...(etcd ? { etcd: { ...etcd, checkedAt: new Date().toISOString() } } : {}),
        ...(this.namesCommands && this.command ? { command: this.command } : {}),
      })
    )
      return;
    this.reports++;
    this.lastEtcd = etcd;
  }

  private settleWelcome(ok: boolean): void {
    const waiters = this.welcomeWaiters;
    this.welcomeWaiters = [];
    for (const w of waiters) w(ok);
  }
}

function hex(n: number): string {
  return (n & 255).toString(16).padStart(2, "0");
}
