import { EventEmitter } from "node:events";
import type { Agent as HttpAgent } from "node:http";
import type { LookupFunction } from "node:net";
import { join } from "node:path";
import {
  AGENT_CAPABILITIES,
  type AgentFrame,
  assertNever,
  Backoff,
  type BackoffOptions,
  type BackupReportFrame,
  type CertProfile,
  CloseCode,
  type ClusterReportFrame,
  CONTROL_CAPABILITIES,
  CommandErrorCode,
  type CommandFrame,
  type CommandName,
  type CommandPayload,
  type CommandResult,
  type ControlFrame,
  checkCommandResult,
  closeCodeName,
  closeReason,
  encodeFrame,
  FATAL_CLOSE_CODES,
  type HelloPayload,
  type HostFacts,
  MAX_FRAME_BYTES,
  type NodeReportFrame,
  PROTOCOL_VERSION,
  parseControlFrame,
  type RawFrame,
  type StatusFrame,
  unknownCommandOf,
  type WelcomeFrame,
} from "@keelson/protocol";
import WebSocket from "ws";
import { COMMAND_RECORD_FILE, type CommandOutcome, CommandRecord } from "./command-record.ts";
import { ControlPlanes } from "./control-planes.ts";
import { isCertificateError } from "./trust.ts";
import { linkUrl } from "./url.ts";

/** A host agent declares every capability but the in-cluster agent's. */
const HOST_CAPABILITIES = Object.values(AGENT_CAPABILITIES).filter((c) => c !== AGENT_CAPABILITIES.clusterReport);

/** pino-compatible subset. */
export interface LinkLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface CommandContext {
  id: string;
  timeoutMs: number;
  /** Aborted when the command times out or the agent stops; handlers should give up then. */
  signal: AbortSignal;
}

export type CommandHandler<N extends CommandName> = (
  payload: CommandPayload<N>,
  ctx: CommandContext,
) => Promise<CommandResult<N>>;
export type CommandHandlers = { [N in CommandName]?: CommandHandler<N> };

export interface LinkClientOptions {
  /** The control plane's http(s) URL, or the link's ws(s) URL; or several replicas' (moved through on failures). */
  url: string | ControlPlanes;
  hostId: string;
  credential: string;
  /**
   * How to reach a link URL (link/trust.ts): the CA the server's certificate must chain to (none:
   * the system's store), the pinned address's lookup (pins.ts), and the outbound proxy's agent
   * where the URL goes through one.
   */
  connection?: (url: string) => { ca?: string; agent?: HttpAgent; lookup?: LookupFunction };
  /** Where the record of handled command ids lives (commands.json). */
  stateDir: string;
  log: LinkLog;
  /** Called on every connect: the hello reflects the host as it is now. */
  hello: () => HelloPayload | Promise<HelloPayload>;
  handlers: CommandHandlers;
  /** What the hello declares (AGENT_CAPABILITIES); default all of them: a host agent's. */
  capabilities?: readonly string[];
  backoff?: BackoffOptions;
  /** Without a welcome within this after opening, the attempt is abandoned. Default 10 s. */
  welcomeTimeoutMs?: number;
  /** How long a token.verify or cluster-token.verify may wait for its answer. Default 5 s. */
  verifyTimeoutMs?: number;
  /** How long a cert.sign may wait for its answer. Default 30 s. */
  signTimeoutMs?: number;
  /** How many handled command ids are remembered. Default 500. */
  recordLimit?: number;
}

export interface LinkCloseInfo {
  code: number;
  /** CloseCode name, e.g. "UNAUTHORIZED", or the HTTP status of a refused upgrade. */
  codeName: string;
  reason: string;
}

export interface LinkClientEvents {
  connected: [WelcomeFrame];
  disconnected: [LinkCloseInfo];
  /** The control plane refused this agent for good (credential, protocol version); do not restart blindly. */
  fatal: [LinkCloseInfo];
}

/** The link is down (or went down) while a request over it was waiting. */
export class LinkUnavailableError extends Error {
  override name = "LinkUnavailableError";
}

/** The control plane answered a signing request with a refusal (wrong SANs, not a master, ...). */
export class CertificateRefusedError extends Error {
  override name = "CertificateRefusedError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface CertificateRequest {
  profile: CertProfile;
  csrPem: string;
  /** The SANs the CSR asks for; the control plane checks them against this node. */
  dnsNames: string[];
  ipAddresses: string[];
}

export interface SignedCertificatePem {
  certPem: string;
  caCertPem: string;
  serviceAccountKeyPem?: string;
  clusterSigning?: { certPem: string; keyPem: string };
}

/** The answer frames a request waits for, by the request's frame type. */
type AnswerFrame = Extract<ControlFrame, { type: "token.verified" | "cert.signed" | "cluster-token.verified" }>;

/** The answer frame of one type. */
type Answer<T extends AnswerFrame["type"]> = Extract<AnswerFrame, { type: T }>;

interface Waiter {
  /** The frame type that settles it: an answer of another type with the same id is ignored. */
  answer: AnswerFrame["type"];
  settle(frame: AnswerFrame): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * The agent's end of the link (DESIGN.md "Agent link"): one WebSocket to the control plane,
 * hello/welcome, a watchdog on the control plane's pings, reconnect with backoff and jitter,
 * no retry after an authentication or protocol-version refusal, and command dispatch in which
 * every id runs at most once (see CommandRecord).
 *
 * Over 400 lines on purpose, for now: the socket's lifecycle, the watchdog, reconnects and the
 * requests waiting on the socket share one piece of state (the current socket and whether it
 * is still current), and each handler must check it; split apart they would each need it
 * passed in. The command dispatch (runCommand and its record) is the part that can leave next.
 */
export class LinkClient extends EventEmitter<LinkClientEvents> {
  private readonly planes: ControlPlanes;
  private readonly backoff: Backoff;
  private readonly record: CommandRecord;
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly requests = new Map<string, Waiter>();
  private ws: WebSocket | undefined;
  private welcome: WelcomeFrame | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = true;
  private nextRequestId = 1;

  constructor(private readonly options: LinkClientOptions) {
    super();
    this.planes = typeof options.url === "string" ? new ControlPlanes([options.url]) : options.url;
    // Every URL checked now (the settings did too): a bad one fails at construction, not at a reconnect.
    for (const url of this.planes.urls) linkUrl(url);
    this.backoff = new Backoff(options.backoff);
    this.record = new CommandRecord(join(options.stateDir, COMMAND_RECORD_FILE), options.recordLimit);
  }

  /** True between the welcome and the end of that connection. */
  get connected(): boolean {
    return this.welcome !== undefined && this.ws?.readyState === WebSocket.OPEN;
  }

  get projectId(): string | undefined {
    return this.welcome?.projectId;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  /**
   * Graceful stop: no new connection, running commands get `graceMs` to finish and are then
   * aborted (each still gets its one result), and the link closes with going-away.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const running = [...this.running.values()];
    if (running.length > 0) {
      const all = Promise.all(running.map((r) => r.done));
      const grace = new Promise<"late">((resolve) =>
        setTimeout(() => resolve("late"), options.graceMs ?? 10_000).unref(),
      );
      if ((await Promise.race([all, grace])) === "late") {
        for (const r of this.running.values()) r.controller.abort(new Error("the agent is stopping"));
        await all;
      }
    }
    const ws = this.ws;
    this.dropConnection();
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once("close", () => resolve()));
      ws.close(CloseCode.GOING_AWAY, "agent shutting down");
      const timer = setTimeout(() => ws.terminate(), 2_000);
      await closed;
      clearTimeout(timer);
    }
  }

  /**
   * Ends the current connection gracefully (what was sent on it, a command's result too, goes
   * out first) and links again, over the way `connection` gives now: the control-plane pins changed.
   */
  relink(reason: string): void {
    if (this.stopped || !this.ws) return;
    this.options.log.info({ reason }, "linking again");
    this.ws.close(1000, closeReason(reason));
  }

  /** Sends the agent's status now; false when not connected (the next hello carries it). */
  sendStatus(status: Omit<StatusFrame, "type">): boolean {
    return this.send({ type: "status", ...status });
  }

  /** Sends changed host facts; false when not connected (the next hello carries them). */
  sendFacts(facts: HostFacts): boolean {
    return this.send({ type: "facts", facts });
  }

  /**
   * Sends the node's phase report; false when not connected (send it again after the next
   * welcome). Its `command` goes only to a control plane that announced it takes the field.
   */
  sendNodeReport(report: Omit<NodeReportFrame, "type">): boolean {
    const { command, ...rest } = report;
    const named = command !== undefined && this.welcome?.capabilities?.includes(CONTROL_CAPABILITIES.reportCommand);
    return this.send({ type: "node.report", ...rest, ...(named ? { command } : {}) });
  }

  /** A master's etcd backup result; false when there is no link to send it on. */
  sendBackupReport(report: Omit<BackupReportFrame, "type">): boolean {
    return this.send({ type: "backup.report", ...report });
  }

  /**
   * An in-cluster agent's reading of its cluster; false when not connected or when the control
   * plane did not announce it takes the frame (an older one would close the link on it).
   */
  sendClusterReport(report: Omit<ClusterReportFrame, "type">): boolean {
    if (!this.welcome?.capabilities?.includes(CONTROL_CAPABILITIES.clusterReport)) return false;
    return this.send({ type: "cluster.report", ...report });
  }

  /**
   * Asks the control plane whether `token` is a valid token of this host's project (or the
   * admin token). Rejects with LinkUnavailableError when there is no link to ask over; callers
   * cache answers (see local-api/token-check.ts).
   */
  verifyProjectToken(token: string): Promise<boolean> {
    const ask = (id: string) => ({ type: "token.verify" as const, id, token });
    return this.checkToken(ask, "token.verified", "a token check").then((answer) => answer.valid);
  }

  /**
   * Asks the control plane who a bearer token presented to this node's bouncer was issued to
   * for this node's cluster: the subject, or null when the token is not valid for it.
   */
  verifyClusterToken(token: string): Promise<string | null> {
    const ask = (id: string) => ({ type: "cluster-token.verify" as const, id, token });
    return this.checkToken(ask, "cluster-token.verified", "a cluster token check").then((answer) => answer.subject);
  }

  /** A token check: a request answered within `verifyTimeoutMs` (5 s unless set). */
  private checkToken<T extends AnswerFrame["type"]>(build: (id: string) => AgentFrame, answer: T, what: string) {
    return this.request(build, answer, this.options.verifyTimeoutMs ?? 5_000, what);
  }

  /**
   * Has the control plane sign a CSR with this node's cluster CA. Rejects with
   * LinkUnavailableError when offline or unanswered in time, CertificateRefusedError when the
   * control plane refuses.
   */
  async signCertificate(
    request: CertificateRequest,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<SignedCertificatePem> {
    const frame = await this.request(
      (id) => ({ type: "cert.sign", id, ...request }),
      "cert.signed",
      options.timeoutMs ?? this.options.signTimeoutMs ?? 30_000,
      `signing the ${request.profile} certificate`,
      options.signal,
    );
    if (!frame.ok) throw new CertificateRefusedError(frame.error.code, frame.error.message);
    return {
      certPem: frame.certPem,
      caCertPem: frame.caCertPem,
      ...(frame.serviceAccountKeyPem ? { serviceAccountKeyPem: frame.serviceAccountKeyPem } : {}),
      ...(frame.clusterSigning ? { clusterSigning: frame.clusterSigning } : {}),
    };
  }

  /** Sends a request frame with a fresh id and waits for the answer of `answer` type with that id. */
  private request<T extends AnswerFrame["type"]>(
    build: (id: string) => AgentFrame,
    answer: T,
    timeoutMs: number,
    what: string,
    signal?: AbortSignal,
  ): Promise<Answer<T>> {
    if (!this.connected) {
      return Promise.reject(new LinkUnavailableError(`not connected to the control plane (${what})`));
    }
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const id = `r${this.nextRequestId++}`;
    return new Promise<Answer<T>>((resolve, reject) => {
      const onAbort = () => finish(() => reject(signal?.reason as Error));
      const finish = (action: () => void) => {
        if (this.requests.get(id) !== waiter) return;
        this.requests.delete(id);
        clearTimeout(waiter.timer);
        signal?.removeEventListener("abort", onAbort);
        action();
      };
      const waiter: Waiter = {
        answer,
        // The hub settles a waiter only with a frame of its `answer` type.
        settle: (frame) => finish(() => resolve(frame as Answer<T>)),
        reject: (err) => finish(() => reject(err)),
        timer: setTimeout(
          () =>
            waiter.reject(new LinkUnavailableError(`the control plane did not answer ${what} within ${timeoutMs} ms`)),
          timeoutMs,
        ),
      };
      this.requests.set(id, waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
      if (!this.send(build(id)))
        waiter.reject(new LinkUnavailableError(`not connected to the control plane (${what})`));
    });
  }

  // ---- connection -----------------------------------------------------------------------

  private connect(): void {
    if (this.stopped) return;
    const url = linkUrl(this.planes.current);
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.options.credential}`, "x-keelson-host-id": this.options.hostId },
      handshakeTimeout: 10_000,
      ...this.options.connection?.(url),
      maxPayload: 4 * MAX_FRAME_BYTES,
      perMessageDeflate: false,
    });
    this.ws = ws;
    // Every handler checks that its socket is still the current one: events of an abandoned
    // socket (the client-side stale-socket guard) must not disturb its successor.
    const current = () => this.ws === ws;
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (body.length < 4096) body += chunk;
      });
      res.on("end", () => {
        if (!current()) return;
        const status = res.statusCode ?? 0;
        const reason = messageOf(body) ?? `HTTP ${status}`;
        this.abandon(ws);
        if (status === 401 || status === 403) {
          this.fail({ code: CloseCode.UNAUTHORIZED, codeName: `HTTP ${status}`, reason });
        } else {
          // A control plane at its link ceiling says when to come back (503 + Retry-After).
          const retryAfterMs = status === 503 ? retryAfterOf(res.headers["retry-after"]) : undefined;
          this.options.log.warn({ status, reason, retryAfterMs }, "control plane refused the link; will retry");
          this.scheduleReconnect(retryAfterMs);
        }
      });
    });
    ws.on("open", () => {
      if (current()) void this.sendHello(ws);
    });
    ws.on("message", (data: RawFrame) => {
      if (current()) this.onMessage(ws, data);
    });
    ws.on("ping", () => {
      // Before the welcome the watchdog bounds the handshake; pings must not extend that.
      if (current() && this.welcome) this.armWatchdog();
    });
    ws.on("error", (err) => {
      if (!current()) return;
      // A certificate the trust refuses is worth an operator's attention (a man in the middle,
      // or a control plane with another CA); other socket errors show up as the close below.
      if (isCertificateError(err)) {
        this.options.log.warn(
          { err: err.message, code: (err as NodeJS.ErrnoException).code },
          "the control plane's certificate is not trusted; not linking",
        );
      } else this.options.log.debug({ err: err.message }, "link socket error");
    });
    ws.on("close", (code, reasonBuffer) => {
      if (!current()) return;
      const info = { code, codeName: closeCodeName(code), reason: reasonBuffer.toString() };
      const wasConnected = this.welcome !== undefined;
      this.dropConnection();
      if (wasConnected) this.emit("disconnected", info);
      if (FATAL_CLOSE_CODES.has(code)) return this.fail(info);
      if (this.stopped) return;
      this.options.log.info(info, "link closed; reconnecting");
      this.scheduleReconnect();
    });
    // Until the welcome the watchdog bounds the handshake and hello exchange.
    this.armWatchdog(this.options.welcomeTimeoutMs ?? 10_000);
  }

  private async sendHello(ws: WebSocket): Promise<void> {
    try {
      const hello = await this.options.hello();
      if (this.ws !== ws) return;
      this.sendOn(ws, {
        type: "hello",
        protocolVersion: PROTOCOL_VERSION,
        capabilities: [...(this.options.capabilities ?? HOST_CAPABILITIES)],
        ...hello,
      });
    } catch (err) {
      this.options.log.error({ err }, "could not build the hello; retrying");
      this.abandon(ws);
      this.scheduleReconnect();
    }
  }

  private onMessage(ws: WebSocket, data: RawFrame): void {
    const parsed = parseControlFrame(data);
    if (!parsed.ok) {
      // A newer control plane's command: say so and keep the link, as for a known one without a handler.
      const unknown = this.welcome ? unknownCommandOf(data) : undefined;
      if (unknown) {
        this.options.log.warn({ command: unknown.name, id: unknown.id }, "command unknown to this agent");
        this.sendResult(
          unknown.id,
          failure(CommandErrorCode.UNKNOWN_COMMAND, `this agent does not know the command ${unknown.name}`),
        );
        return;
      }
      this.options.log.error({ reason: parsed.error.message }, "bad frame from the control plane");
      ws.close(CloseCode[parsed.error.code], closeReason(parsed.error.message));
      return;
    }
    const frame: ControlFrame = parsed.frame;
    switch (frame.type) {
      case "welcome":
        if (frame.hostId !== this.options.hostId) {
          ws.close(CloseCode.UNAUTHORIZED, closeReason(`welcomed as ${frame.hostId}, expected ${this.options.hostId}`));
          return;
        }
        this.welcome = frame;
        this.backoff.connected();
        this.armWatchdog();
        this.options.log.info({ hostId: frame.hostId, projectId: frame.projectId }, "link connected");
        this.emit("connected", frame);
        return;
      case "command":
        if (!this.welcome) {
          ws.close(CloseCode.BAD_FRAME, "command before welcome");
          return;
        }
        this.onCommand(frame);
        return;
      case "token.verified":
      case "cert.signed":
      case "cluster-token.verified": {
        // A late answer (after its timeout) finds no waiter and is dropped.
        const waiter = this.requests.get(frame.id);
        if (waiter?.answer === frame.type) waiter.settle(frame);
        return;
      }
      default:
        assertNever(frame);
    }
  }

  /**
   * Without pings for 2.5 heartbeats the control plane (or the path to it) is gone even if TCP
   * has not noticed; terminating starts a reconnect.
   */
  private armWatchdog(ms?: number): void {
    clearTimeout(this.watchdog);
    const timeout = ms ?? Math.round((this.welcome?.heartbeatMs ?? 15_000) * 2.5);
    const ws = this.ws;
    this.watchdog = setTimeout(() => {
      if (this.ws !== ws || !ws) return;
      this.options.log.warn({ timeoutMs: timeout }, "no heartbeat from the control plane; reconnecting");
      ws.terminate();
    }, timeout);
    this.watchdog.unref();
  }

  /** `atLeastMs`: the control plane's Retry-After, spread by up to 20% so refused agents do not return at once. */
  private scheduleReconnect(atLeastMs?: number): void {
    if (this.stopped) return;
    // With several replicas' URLs, the next attempt goes to the next one: the one that failed or
    // ended the link may be dead or stopping.
    if (this.planes.urls.length > 1) {
      this.options.log.info({ from: this.planes.current, to: this.planes.next() }, "moving to the next control plane");
    }
    this.backoff.disconnected();
    const backoff = this.backoff.next();
    const delay = atLeastMs === undefined ? backoff : Math.max(backoff, atLeastMs * (1 + Math.random() * 0.2));
    this.options.log.debug({ delayMs: delay, attempt: this.backoff.attempts }, "reconnect scheduled");
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }

  private fail(info: LinkCloseInfo): void {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    this.dropConnection();
    this.options.log.error(info, "the control plane refused this agent; not retrying");
    this.emit("fatal", info);
  }

  /** Forgets the current socket after terminating it; its later events are ignored. */
  private abandon(ws: WebSocket): void {
    if (this.ws === ws) this.dropConnection();
    ws.removeAllListeners("unexpected-response");
    ws.on("error", () => {});
    ws.terminate();
  }

  private dropConnection(): void {
    clearTimeout(this.watchdog);
    this.ws = undefined;
    this.welcome = undefined;
    for (const waiter of [...this.requests.values()]) {
      waiter.reject(new LinkUnavailableError("the link closed before the control plane answered"));
    }
  }

  private send(frame: AgentFrame): boolean {
    if (!this.connected || !this.ws) return false;
    return this.sendOn(this.ws, frame);
  }

  private sendOn(ws: WebSocket, frame: AgentFrame): boolean {
    if (ws.readyState !== WebSocket.OPEN) return false;
    ws.send(encodeFrame(frame));
    return true;
  }

  // ---- commands -------------------------------------------------------------------------

  private onCommand(frame: CommandFrame): void {
    const entry = this.record.get(frame.id);
    if (entry?.outcome) {
      // Re-delivered after a reconnect: answer from the record, do not run it again.
      this.options.log.info({ id: frame.id, name: frame.name }, "command re-delivered; answering from the record");
      this.sendResult(frame.id, entry.outcome);
      return;
    }
    // Still running in this process: its result goes out on whatever link is up when it ends.
    if (entry || this.running.has(frame.id)) return;
    this.record.start(frame.id, frame.name);
    const controller = new AbortController();
    const done = this.execute(frame, controller).then((outcome) => {
      this.running.delete(frame.id);
      this.record.finish(frame.id, outcome);
      this.sendResult(frame.id, outcome);
    });
    this.running.set(frame.id, { controller, done });
  }

  private async execute(frame: CommandFrame, controller: AbortController): Promise<CommandOutcome> {
    const handler = this.options.handlers[frame.name] as
      | ((payload: unknown, ctx: CommandContext) => Promise<unknown>)
      | undefined;
    if (!handler) {
      return failure(CommandErrorCode.UNKNOWN_COMMAND, `this agent has no handler for ${frame.name}`);
    }
    const timer = setTimeout(
      () => controller.abort(new CommandTimeout(`${frame.name} did not finish within ${frame.timeoutMs} ms`)),
      frame.timeoutMs,
    );
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener("abort", () => reject(controller.signal.reason), { once: true });
    });
    try {
      const ctx: CommandContext = { id: frame.id, timeoutMs: frame.timeoutMs, signal: controller.signal };
      const result = await Promise.race([handler(frame.payload, ctx), aborted]);
      const problem = checkCommandResult(frame.name, result);
      if (problem) return failure(CommandErrorCode.BAD_RESULT, `the handler's result is invalid: ${problem}`);
      return { ok: true, result };
    } catch (err) {
      if (err instanceof CommandTimeout) return failure(CommandErrorCode.TIMEOUT, err.message);
      if (controller.signal.aborted)
        return failure(CommandErrorCode.ABORTED, String((controller.signal.reason as Error)?.message));
      this.options.log.warn({ id: frame.id, name: frame.name, err }, "command failed");
      return failure(CommandErrorCode.FAILED, err instanceof Error ? err.message : String(err));
    } finally {
      clearTimeout(timer);
    }
  }

  private sendResult(id: string, outcome: CommandOutcome): void {
    this.send(
      outcome.ok
        ? { type: "result", id, ok: true, result: outcome.result }
        : { type: "result", id, ok: false, error: outcome.error },
    );
  }
}

class CommandTimeout extends Error {
  override name = "CommandTimeout";
}

function failure(code: string, message: string): CommandOutcome {
  return { ok: false, error: { code, message: message.slice(0, 4096) } };
}

function messageOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { message?: unknown };
    return typeof parsed.message === "string" ? parsed.message : undefined;
  } catch {
    return body.trim() || undefined;
  }
}

/** Retry-After in seconds (the only form the control plane sends), bounded to 1 s … 10 min. */
export function retryAfterOf(header: string | string[] | undefined): number | undefined {
  const text = Array.isArray(header) ? header[0] : header;
  if (!text || !/^\d+$/.test(text.trim())) return undefined;
  return Math.min(600, Math.max(1, Number(text))) * 1000;
}
