import {
  type AgentFrame,
  Backoff,
  type CommandFrame,
  type ControlFrame,
  encodeFrame,
  FATAL_CLOSE_CODES,
  type HostFacts,
  PROTOCOL_VERSION,
  parseControlFrame,
  WebSocket,
} from "./deps.ts";

export interface SimBehaviour {
  /** Delay before answering a command. */
  latencyMs: number;
  /** Probability (0..1) that a command is answered with ok: false. */
  failureRate: number;
  random: () => number;
  reconnect: boolean;
}

export interface SimAgentInit {
  index: number;
  hostname: string;
  hostId: string;
  credential: string;
  linkUrl: string;
  behaviour: SimBehaviour;
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
  /** Set when the control plane refused this agent for good. */
  fatal: { code: number; reason: string } | undefined;
  commands = 0;
  failures = 0;
  connects = 0;
  private ws: WebSocket | undefined;
  private stopped = false;
  private readonly backoff = new Backoff({ initialMs: 200, maxMs: 30_000 });
  private readonly answered = new Map<string, AgentFrame>();
  private welcomeWaiters: ((ok: boolean) => void)[] = [];
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly init: SimAgentInit) {
    this.index = init.index;
    this.hostname = init.hostname;
    this.hostId = init.hostId;
    this.credential = init.credential;
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
    const ws = new WebSocket(this.init.linkUrl, {
      headers: { authorization: `Bearer ${this.credential}`, "x-keelson-host-id": this.hostId },
      perMessageDeflate: false,
      handshakeTimeout: 30_000,
    });
    this.ws = ws;
    ws.on("open", () => {
      const facts = this.facts();
      ws.send(
        encodeFrame({
          type: "hello",
          protocolVersion: PROTOCOL_VERSION,
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
      this.fatal = { code: res.statusCode ?? 0, reason: `upgrade refused with HTTP ${res.statusCode}` };
      ws.terminate();
    });
    ws.on("error", () => {
      // The close event follows and decides what to do.
    });
    ws.on("close", (code, reason) => {
      if (this.ws !== ws) return;
      this.connected = false;
      this.backoff.disconnected();
      if (FATAL_CLOSE_CODES.has(code)) this.fatal = { code, reason: reason.toString() };
      if (this.stopped || this.fatal || !this.init.behaviour.reconnect) {
        this.settleWelcome(false);
        return;
      }
      this.reconnectTimer = setTimeout(() => this.open(), this.backoff.next());
    });
  }

  private onFrame(frame: ControlFrame): void {
    switch (frame.type) {
      case "welcome":
        this.connected = true;
        this.connects++;
        this.backoff.connected();
        this.settleWelcome(true);
        return;
      case "command":
        this.onCommand(frame);
        return;
      case "token.verified":
      case "cert.signed":
      case "cluster-token.verified":
        // The simulator makes none of these requests (cert.* and cluster-token.* are issue 4).
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
      const result = this.resultFor(frame, random() < failureRate);
      this.answered.set(frame.id, result);
      if (this.answered.size > RECORD_LIMIT) this.answered.delete(this.answered.keys().next().value as string);
      this.send(result);
    };
    if (latencyMs > 0) setTimeout(answer, latencyMs);
    else answer();
  }

  private resultFor(frame: CommandFrame, fail: boolean): AgentFrame {
    if (fail) {
      this.failures++;
      return { type: "result", id: frame.id, ok: false, error: { code: "FAILED", message: "simulated failure" } };
    }
    switch (frame.name) {
      case "ping":
        return { type: "result", id: frame.id, ok: true, result: { at: new Date().toISOString() } };
      case "agent.upgrade": {
        // Pretend to upgrade: report updating now, running on the new version shortly after.
        const version = frame.payload.version;
        setTimeout(() => {
          this.agentVersion = version;
          this.send({ type: "status", agentStatus: "running", agentVersion: version });
        }, this.init.behaviour.latencyMs + 10);
        return { type: "result", id: frame.id, ok: true, result: { accepted: true, status: "updating" } };
      }
      case "node.join":
      case "node.leave":
        // issue 4: node phases are not simulated yet; say so rather than pretend.
        return {
          type: "result",
          id: frame.id,
          ok: false,
          error: { code: "UNKNOWN_COMMAND", message: `the simulator does not simulate ${frame.name} yet` },
        };
      default: {
        const never: never = frame;
        throw new Error(`unhandled command ${JSON.stringify(never)}`);
      }
    }
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
