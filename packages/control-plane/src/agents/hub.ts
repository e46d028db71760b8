import type { Server } from "node:http";
import {
  type AgentFrame,
  assertNever,
  CloseCode,
  type CommandName,
  type CommandPayload,
  type CommandResult,
  DEFAULT_COMMAND_TIMEOUT_MS,
  DEFAULT_HEARTBEAT_MS,
  type HelloFrame,
  MAX_COMMAND_TIMEOUT_MS,
  MAX_FRAME_BYTES,
  parseAgentFrame,
  type RawFrame,
} from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import { type WebSocket, WebSocketServer } from "ws";
import type { CommandObserver } from "../metrics/observe.ts";
import { type CommandIssuer, CommandRelay, type CommandRelayOptions } from "./command-relay.ts";
import { HostOfflineError } from "./errors.ts";
import { helloRefusal, welcomeFrame } from "./hello-answer.ts";
import type { LinkBook } from "./link-book.ts";
import { LinkCapacity } from "./link-capacity.ts";
import type { LinkDomain, Presence } from "./link-domain.ts";
import { closeAll, pingAll } from "./link-drain.ts";
import { reapDeadLinks, resetStalePresence } from "./link-reap.ts";
import { DRAINING, type LinkRefusal, SHUTTING_DOWN, UpgradeGate, type UpgradeHandler } from "./link-upgrade.ts";
import { agentEvent, NodeEvents } from "./node-events.ts";
import { NodeFrameAnswers } from "./node-frames.ts";
import { AgentSession, AgentSocket, CapabilitySets, SessionRegistry, sessionOf } from "./sessions.ts";

export interface AgentHubOptions {
  /** Everything the link asks of the domain (authentication, presence, reports, signing). */
  domain: LinkDomain;
  log: FastifyBaseLogger;
  /** Ping interval; a peer that misses two pongs in a row is terminated. Default 15 s. */
  heartbeatMs?: number;
  /** How long a new connection may take to send its hello. Default 10 s. */
  helloTimeoutMs?: number;
  /** How long close() waits for agents to acknowledge going-away before cutting them. Default 2 s. */
  drainTimeoutMs?: number;
  /**
   * The most links held at once (link-capacity.ts): beyond it an agent gets 503 with
   * Retry-After before the upgrade. Default: no ceiling.
   */
  linkLimit?: number;
  /** Told of every command sent and how it ended (metrics). */
  commands?: CommandObserver;
  /** Which replica holds each host's link, cluster-wide (agent_links). */
  links: LinkBook;
  /** Where commands are kept (agent_commands) and how replicas are woken for them. */
  relay: Pick<CommandRelayOptions, "db" | "channels" | "retentionMs">;
}

/**
 * The control plane's end of the agent link (DESIGN.md "Agent link"): authenticates the
 * upgrade, validates every frame, keeps one session per host, pings, relays commands and
 * records presence in the nodes table. Node reports are stored and announced on `nodeEvents`
 * (operations wait on them); certificate and cluster-token requests are answered here.
 * Which replica holds each link cluster-wide is link-book.ts's; commands go through
 * command-relay.ts; the upgrade's admission is link-upgrade.ts's; what a hello and a frame are
 * answered with lives in hello-answer.ts and node-frames.ts; the start reset and the reaping of
 * dead replicas' links in link-reap.ts; the drain and heartbeat in link-drain.ts.
 */
export class AgentHub {
  readonly heartbeatMs: number;
  /** Node reports and link changes, as they happen. */
  readonly nodeEvents = new NodeEvents();
  private readonly helloTimeoutMs: number;
  private readonly drainTimeoutMs: number;
  private readonly log: FastifyBaseLogger;
  private readonly domain: LinkDomain;
  private readonly presence: Presence;
  private readonly linkBook: LinkBook;
  private readonly capacity: LinkCapacity;
  private readonly nodeFrames: NodeFrameAnswers;
  private readonly wss: WebSocketServer;
  private readonly registry = new SessionRegistry<AgentSession>();
  private readonly capabilitySets = new CapabilitySets();
  /** Every open socket, helloed or not, so a drain reaches them all. */
  private readonly sockets = new Set<AgentSession>();
  private readonly relay: CommandRelay;
  private readonly commands: CommandObserver | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** The upgrade listener: the link's admission, and the other WebSocket endpoints (the web CLI). */
  private readonly gate: UpgradeGate;
  /** Why new links are refused: the server stops (close()), or this replica drains (handOver()). */
  private closedTo: LinkRefusal | undefined;

  constructor(options: AgentHubOptions) {
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.helloTimeoutMs = options.helloTimeoutMs ?? 10_000;
    this.drainTimeoutMs = options.drainTimeoutMs ?? 2_000;
    this.log = options.log;
    this.domain = options.domain;
    this.presence = options.domain.presence;
    this.linkBook = options.links;
    this.linkBook.onTaken = (hostId, epoch) => this.onTakenElsewhere(hostId, epoch);
    this.relay = new CommandRelay({
      ...options.relay,
      log: options.log,
      observer: options.commands,
      sessionOf: (hostId) => {
        const session = this.registry.get(hostId);
        return session?.open ? session : undefined;
      },
    });
    this.commands = options.commands;
    this.nodeFrames = new NodeFrameAnswers(options.domain, this.nodeEvents, options.log);
    this.capacity = new LinkCapacity(options.linkLimit ?? Number.POSITIVE_INFINITY, (open, limit) =>
      this.log.warn({ open, limit }, "agent links are near their ceiling; agents beyond it will be refused with 503"),
    );
    // Frames up to 4x the protocol limit reach the parser and get BAD_FRAME with a reason;
    // beyond that ws itself closes with 1009 before buffering more.
    this.wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      maxPayload: 4 * MAX_FRAME_BYTES,
      perMessageDeflate: false,
      WebSocket: AgentSocket,
    });
    this.gate = new UpgradeGate({
      log: options.log,
      capacity: this.capacity,
      authenticate: (headers) => this.domain.authenticate(headers),
      open: () => this.sockets.size,
      closedTo: () => this.closedTo,
      admit: (request, socket, head, auth) =>
        this.wss.handleUpgrade(request, socket, head, (ws) =>
          this.onConnection(ws as AgentSocket, auth.hostId, auth.projectId),
        ),
    });
  }

  /** At start, before the first link (link-reap.ts). */
  resetStalePresence = (): Promise<void> => resetStalePresence(this.linkBook, this.presence, this.log);
  /** With each replica heartbeat: dead replicas' links (link-reap.ts). */
  reapDeadLinks = (): Promise<void> => reapDeadLinks(this.linkBook, this.presence, this.nodeEvents);

  /** Listens for link changes and commands of the other replicas (before serving the link). */
  async listen(): Promise<void> {
    await this.linkBook.listen();
    await this.relay.listen();
  }

  /** Serves the link on `server` (the control plane's own listener). */
  attach(server: Server): void {
    this.gate.attach(server);
    this.heartbeat = setInterval(() => pingAll(this.registry.values(), this.log), this.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Hands upgrades of `path` to `handler`: one upgrade listener, so an unknown path still gets its 404. */
  serveUpgrade(path: string, handler: UpgradeHandler): void {
    this.gate.serve(path, handler);
  }

  /** Whether the host's agent is linked to any replica (this one, or another live one). */
  isConnected(hostId: string): boolean {
    return this.linkedHere(hostId) || this.linkBook.heldElsewhere(hostId);
  }

  /** Whether the host's agent is linked to this replica. */
  linkedHere(hostId: string): boolean {
    return this.registry.get(hostId)?.open === true;
  }

  /**
   * Whether the host's agent, as linked now, declared `capability` in its hello: the session's
   * here, or what the replica holding the link recorded with it (agent_links). Undefined while
   * no replica holds it, or when the holder is older than the record: a caller that may go
   * ahead on "unknown" sends the command and handles the agent's refusal.
   */
  supports(hostId: string, capability: string): boolean | undefined {
    const session = this.registry.get(hostId);
    if (session?.open) return session.capabilities.has(capability);
    return this.linkBook.capabilitiesElsewhere(hostId)?.has(capability);
  }

  /** Agent links held (helloed or not) against the ceiling, for /readyz. */
  get links(): { open: number; limit: number | null; near: boolean } {
    const open = this.sockets.size;
    const limit = Number.isFinite(this.capacity.limit) ? this.capacity.limit : null;
    return { open, limit, near: this.capacity.isNear(open) };
  }

  get connectedCount(): number {
    return this.registry.size;
  }

  /** Hosts with a live link to any replica (this one, or another live one: link-book.ts), optionally of one project. */
  connectedHosts(projectId?: string): string[] {
    const hosts = new Set(this.linkBook.hostsElsewhere(projectId));
    for (const s of this.registry.values())
      if (s.open && (projectId === undefined || s.projectId === projectId)) hosts.add(s.hostId);
    return [...hosts];
  }

  /**
   * Sends a command (through any replica: command-relay.ts) and resolves with its validated
   * result. Rejects at once with HostOfflineError when no replica holds the host's link; if the
   * link drops after sending, the command waits for its timeout and is re-delivered (same id)
   * when the host links again, to any replica.
   */
  sendCommand<N extends CommandName>(
    hostId: string,
    name: N,
    payload: CommandPayload<N>,
    /**
     * `id`: a caller that may send the same command again after a control-plane restart gives
     * it a stable id; the agent's command record then answers a repeat without running it twice.
     * `issuer`: the operation and fence it is sent for; never sent once the fence moved on.
     */
    options: { timeoutMs?: number; id?: string; issuer?: CommandIssuer } = {},
  ): Promise<CommandResult<N>> {
    if (this.closedTo === SHUTTING_DOWN || !this.isConnected(hostId)) {
      this.commands?.settled(name, "offline", 0);
      const why = this.closedTo === SHUTTING_DOWN ? SHUTTING_DOWN.message : undefined;
      return Promise.reject(new HostOfflineError(hostId, why));
    }
    const timeoutMs = Math.min(
      Math.max(1, Math.round(options.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS)),
      MAX_COMMAND_TIMEOUT_MS,
    );
    return this.relay.issue(hostId, name, payload, {
      timeoutMs,
      ...(options.id === undefined ? {} : { id: options.id }),
      ...(options.issuer ? { issuer: options.issuer } : {}),
    });
  }

  /**
   * Ends a host's link because its credential was revoked (the host was deleted): 4401, which
   * the agent does not retry. A link another replica holds stays until it drops; it cannot come back.
   */
  revoke(hostId: string, reason: string): void {
    this.registry.get(hostId)?.close(CloseCode.UNAUTHORIZED, reason);
  }

  /** Writes presence now (tests; shutdown). */
  flushPresence(): Promise<void> {
    return this.presence.flush();
  }

  /** At shutdown: stop accepting, close every link with going-away, fail pending commands, write presence. */
  async close(): Promise<void> {
    if (this.closedTo === SHUTTING_DOWN) return;
    this.closedTo = SHUTTING_DOWN;
    this.gate.detach();
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.relay.close(SHUTTING_DOWN.message);
    await closeAll(this.sockets, this.drainTimeoutMs, SHUTTING_DOWN.message);
    // Close events of terminated sockets may come later; record the hosts as gone now (those
    // whose link was still this replica's: one statement for all).
    const dropped = await this.linkBook.dropAllHere().catch((err: unknown) => {
      this.log.warn({ err }, "could not remove this replica's agent links");
      return [...this.registry.values()].map((s) => s.hostId);
    });
    for (const hostId of dropped) this.presence.disconnected(hostId);
    await this.linkBook.close();
    await this.presence.close();
    this.wss.close();
  }

  /** A replica drain: links refused (503 "draining"), those held closed with going-away; commands stay durable. */
  async handOver(): Promise<void> {
    if (this.closedTo) return;
    this.closedTo = DRAINING;
    await closeAll(this.sockets, this.drainTimeoutMs, DRAINING.message);
  }

  // ---- connection lifecycle -------------------------------------------------------------

  /**
   * The listeners of every link's socket, shared by all of them: each finds its session on the
   * socket it is called on (AgentSocket), so a link holds no closures of its own.
   */
  private readonly linkListeners = AgentHub.linkListenersOf(this);

  private static linkListenersOf(hub: AgentHub) {
    // ws calls a listener on the socket; `this` is typed as its own WebSocket class.
    return {
      message(this: WebSocket, data: RawFrame): void {
        const session = sessionOf(this);
        if (session) hub.onFrame(session, data);
      },
      pong(this: WebSocket): void {
        const session = sessionOf(this);
        if (!session) return;
        session.missedPongs = 0;
        hub.presence.touch(session.hostId);
      },
      error(this: WebSocket, err: Error): void {
        const session = sessionOf(this);
        if (session) hub.log.debug({ err, hostId: session.hostId, session: session.id }, "agent socket error");
      },
      close(this: WebSocket, code: number, reason: Buffer): void {
        const session = sessionOf(this);
        if (session) hub.onClose(session, code, reason.toString());
      },
    };
  }

  private onConnection(ws: AgentSocket, hostId: string, projectId: string): void {
    const session = new AgentSession(ws, hostId, projectId);
    if (this.closedTo) {
      session.close(CloseCode.GOING_AWAY, this.closedTo.message);
      return;
    }
    this.sockets.add(session);
    this.capacity.observe(this.sockets.size);
    session.helloTimer = setTimeout(
      () => session.close(CloseCode.HELLO_TIMEOUT, `no hello within ${this.helloTimeoutMs} ms`),
      this.helloTimeoutMs,
    );
    ws.on("message", this.linkListeners.message);
    ws.on("pong", this.linkListeners.pong);
    ws.on("error", this.linkListeners.error);
    ws.on("close", this.linkListeners.close);
  }

  /** A frame of the link, handled after the ones before it (AgentSession.enqueue). */
  private onFrame(session: AgentSession, data: RawFrame): void {
    session.enqueue(
      () => this.onMessage(session, data),
      (err) => this.log.error({ err, hostId: session.hostId, session: session.id }, "handling an agent frame failed"),
    );
  }

  private onClose(session: AgentSession, code: number, reason: string): void {
    clearTimeout(session.helloTimer);
    this.sockets.delete(session);
    this.capacity.observe(this.sockets.size);
    // The stale-socket guard: a superseded session's late close must not unregister its
    // successor or mark the host offline.
    if (!this.registry.removeIfCurrent(session)) return;
    // A drain removes every link of this replica at once (close()).
    if (this.closedTo !== SHUTTING_DOWN) {
      void this.linkBook.drop(session.hostId, session.epoch).then((stillOurs) => {
        // Taken by another replica meanwhile: the host is connected there.
        if (stillOurs) this.presence.disconnected(session.hostId);
      });
    }
    this.log.info({ hostId: session.hostId, session: session.id, code, reason }, "agent disconnected");
    this.nodeEvents.emit({ type: "link", hostId: session.hostId, projectId: session.projectId, connected: false });
  }

  private async onMessage(session: AgentSession, data: RawFrame): Promise<void> {
    const parsed = parseAgentFrame(data);
    if (!parsed.ok) {
      this.log.warn({ hostId: session.hostId, reason: parsed.error.message }, "closing agent link: bad frame");
      session.close(CloseCode[parsed.error.code], parsed.error.message);
      return;
    }
    const frame: AgentFrame = parsed.frame;
    if (!session.helloed && frame.type !== "hello") {
      session.close(CloseCode.BAD_FRAME, `the first frame must be hello, not ${frame.type}`);
      return;
    }
    switch (frame.type) {
      case "hello":
        await this.onHello(session, frame);
        return;
      case "facts":
        this.presence.change(session.hostId, { facts: frame.facts, primaryIp: frame.facts.primaryIp });
        return;
      case "status":
        this.nodeFrames.status(session, frame);
        return;
      case "result":
        this.relay.onResult(session.hostId, frame);
        return;
      case "token.verify":
        await this.nodeFrames.tokenVerify(session, frame);
        return;
      case "node.report":
        await this.nodeFrames.nodeReport(session, frame);
        return;
      case "cert.sign":
        this.nodeFrames.certSign(session, frame);
        return;
      case "cluster-token.verify":
        await this.nodeFrames.clusterTokenVerify(session, frame);
        return;
      case "backup.report":
        await this.nodeFrames.backupReport(session, frame);
        return;
      case "cluster.report":
        await this.nodeFrames.clusterReport(session, frame);
        return;
      default:
        assertNever(frame);
    }
  }

  private async onHello(session: AgentSession, hello: HelloFrame): Promise<void> {
    const refused = helloRefusal(session, hello);
    if (refused) {
      session.close(refused.code, refused.reason);
      return;
    }
    clearTimeout(session.helloTimer);
    session.helloTimer = undefined;
    session.helloed = true;
    session.capabilities = this.capabilitySets.of(hello.capabilities ?? []);
    session.epoch = await this.linkBook.take(session.hostId, session.projectId, session.capabilities);
    if (!session.open || (session.epoch !== undefined && this.linkBook.supersedes(session.hostId, session.epoch))) {
      // Closed, or linked again elsewhere, while the link was being recorded.
      session.close(CloseCode.SUPERSEDED, "superseded by a newer connection of this host");
      if (session.epoch !== undefined) await this.linkBook.drop(session.hostId, session.epoch);
      return;
    }
    const previous = this.registry.replace(session);
    if (previous) {
      this.log.info(
        { hostId: session.hostId, old: previous.id, new: session.id },
        "agent reconnected; closing the old link",
      );
      previous.close(CloseCode.SUPERSEDED, "superseded by a newer connection of this host");
    }
    this.presence.connected(session.hostId, hello);
    session.send(welcomeFrame(session, this.heartbeatMs));
    // Commands sent on a link that dropped before their result (on any replica): same ids, so
    // the agent answers from its record instead of running them again.
    await this.relay
      .onLinked(session)
      .catch((err: unknown) => this.log.warn({ err, hostId: session.hostId }, "could not re-send unanswered commands"));
    this.log.info({ hostId: session.hostId, session: session.id, agentVersion: hello.agentVersion }, "agent connected");
    this.nodeEvents.emit({ type: "link", hostId: session.hostId, projectId: session.projectId, connected: true });
    this.nodeEvents.emit(agentEvent(session, hello));
  }

  /** Another replica took a host's link at `epoch`: a link this replica holds with an older epoch ends. */
  private onTakenElsewhere(hostId: string, epoch: number): void {
    const session = this.registry.get(hostId);
    if (!session || (session.epoch !== undefined && session.epoch >= epoch)) return;
    this.log.info({ hostId, session: session.id, epoch }, "agent linked to another replica; closing the old link");
    session.close(CloseCode.SUPERSEDED, "superseded by a newer connection of this host to another replica");
  }
}
