import { SimAgent, type SimBehaviour } from "./agent.ts";
import { AGENT_LINK_PATH, type PhaseId } from "./deps.ts";
import { runPool } from "./pool.ts";
import { type JoinTokenSource, registerFleet, type SimIdentity } from "./register.ts";
import { fleetTrust } from "./trust.ts";

export interface SimulatorOptions {
  /** The control plane's http(s) URL. */
  url: string;
  /**
   * An https control plane: the KEELSON_CA_HASH the fleet pins, as real agents do (the CA bundle
   * is fetched and a CA with another hash refused before any join token is sent).
   */
  caHash?: string;
  /** Or the CA (PEM) the fleet already trusts, as agents that kept it in their state dir. */
  ca?: string;
  count: number;
  /** One join token: enough for count 1 (join tokens are one-time). */
  joinToken?: string;
  /** One join token per agent. */
  joinTokens?: string[];
  /** Or: mint one join token per agent through the API with the admin token. */
  adminToken?: string;
  projectId?: string;
  /** Already registered hosts (a fleet reconnecting): skips registration. */
  identities?: SimIdentity[];
  /** Delay before answering a command. Default 0. */
  latencyMs?: number;
  /** Probability (0..1) that a command is answered ok: false. Default 0. */
  failureRate?: number;
  /**
   * After `node.join`: the node reports `converging` at once and, this much later, every phase
   * running (status `ok`). Default 0.
   */
  phaseTimeMs?: number;
  /**
   * The phase an agent fails (when its role runs it): one for every agent, or chosen per
   * hostname. The node reports `converging` with the phase failed, then `failed`. Later, per
   * agent: `agent.setFailPhase(id | undefined)`, which also re-runs a joined node's phases (how
   * a test makes a node recover).
   */
  failPhase?: PhaseId | ((hostname: string) => PhaseId | undefined);
  /** Registrations and connection attempts in flight. Default 200. */
  concurrency?: number;
  /** Hostname prefix; agents are <prefix>-00001 and so on. Default "sim". */
  namePrefix?: string;
  /** Reconnect (with backoff) when the link drops. Default true. */
  reconnect?: boolean;
  /**
   * The link URL, when it is not <url>/v1/agents/link (the benchmark's bare baseline server);
   * or several replicas' link URLs: each agent starts at a random one and moves to the next
   * whenever an attempt fails or its link ends, as the real agent does with KEELSON_CONTROL_PLANE's list.
   */
  linkUrl?: string | readonly string[];
  random?: () => number;
  /** Give up waiting for every agent's welcome after this. Default 120 s. */
  connectTimeoutMs?: number;
  /** Every agent's welcomes, failed attempts and ended links (SimAgentInit.onLinkEvent). */
  onLinkEvent?: (event: string) => void;
}

export interface Simulator {
  agents: SimAgent[];
  identities: SimIdentity[];
  /** Time to register the fleet (0 when identities were given). */
  registerMs: number;
  /** Time from the first connection attempt to the last welcome. */
  connectMs: number;
  connectedCount(): number;
  /** Agents linked over TLS (their link's protocol, e.g. TLSv1.3, seen on the upgraded socket). */
  tlsCount(): number;
  /** Commands answered and failures injected, over all agents. */
  stats(): { connected: number; commands: number; failures: number; fatal: number; reports: number };
  stop(): Promise<void>;
}

/**
 * N simulated agents in this process, each with its own WebSocket speaking the real protocol
 * (packages/protocol): registration with join tokens, hello with facts, heartbeats (ws answers
 * pings), command results with configurable latency and failure rate, node membership
 * (`node.join` / `node.leave`) with `node.report` frames shaped like the real phase engine's
 * after a configurable phase time, optionally failing a phase; masters' reports carry etcd
 * member health from the fleet's view of their cluster (SimAgent.etcdHealth). Resolves when
 * every agent has been welcomed.
 */
export async function startSimulator(options: SimulatorOptions): Promise<Simulator> {
  const base = options.url.replace(/\/+$/, "");
  const prefix = options.namePrefix ?? "sim";
  const hostnames = Array.from({ length: options.count }, (_, i) => `${prefix}-${String(i + 1).padStart(5, "0")}`);
  const concurrency = options.concurrency ?? 200;

  // One trust and one TLS context for the whole fleet: N copies of the CA would cost N times the memory.
  const trust = await fleetTrust(base, {
    ...(options.caHash ? { caHash: options.caHash } : {}),
    ...(options.ca ? { ca: options.ca } : {}),
  });
  const registerStart = performance.now();
  const identities =
    options.identities ??
    (await registerFleet(base, hostnames, tokenSource(options), {
      concurrency: Math.min(concurrency, 50),
      fetch: trust.fetch,
    }));
  const registerMs = options.identities ? 0 : performance.now() - registerStart;

  const behaviour: SimBehaviour = {
    latencyMs: options.latencyMs ?? 0,
    failureRate: options.failureRate ?? 0,
    random: options.random ?? Math.random,
    reconnect: options.reconnect ?? true,
    phaseTimeMs: options.phaseTimeMs ?? 0,
    failPhase: options.failPhase,
  };
  const linkUrl = options.linkUrl ?? `${base.replace(/^http/, "ws")}${AGENT_LINK_PATH}`;
  const agents: SimAgent[] = identities.map(
    (id, index) =>
      new SimAgent({
        index: index + 1,
        hostname: hostnames[index] ?? `${prefix}-${index + 1}`,
        hostId: id.hostId,
        credential: id.credential,
        linkUrl,
        secureContext: trust.secureContext,
        behaviour,
        peers: () => agents,
        ...(options.onLinkEvent ? { onLinkEvent: options.onLinkEvent } : {}),
      }),
  );

  const connectStart = performance.now();
  const timeoutMs = options.connectTimeoutMs ?? 120_000;
  try {
    await runPool(agents.length, concurrency, async (i) => {
      const agent = agents[i] as SimAgent;
      // Under a connect storm some handshakes fail; the agent retries with backoff by itself.
      if (await agent.connect(timeoutMs)) return;
      throw new Error(
        `simulated agent ${agent.hostname} did not connect${agent.fatal ? `: ${agent.fatal.reason}` : ` within ${timeoutMs} ms`}`,
      );
    });
  } catch (err) {
    // Leave nothing connected behind a failed start.
    await Promise.all(agents.map((a) => a.stop()));
    throw err;
  }
  const connectMs = performance.now() - connectStart;

  const simulator: Simulator = {
    agents,
    identities,
    registerMs,
    connectMs,
    connectedCount: () => agents.filter((a) => a.connected).length,
    tlsCount: () => agents.filter((a) => a.connected && a.tlsProtocol).length,
    stats: () => ({
      connected: agents.filter((a) => a.connected).length,
      commands: agents.reduce((n, a) => n + a.commands, 0),
      failures: agents.reduce((n, a) => n + a.failures, 0),
      fatal: agents.filter((a) => a.fatal).length,
      reports: agents.reduce((n, a) => n + a.reports, 0),
    }),
    async stop() {
      await runPool(agents.length, 1000, (i) => (agents[i] as SimAgent).stop());
    },
  };
  return simulator;
}

function tokenSource(options: SimulatorOptions): JoinTokenSource {
  if (options.joinTokens) return { joinTokens: options.joinTokens };
  if (options.joinToken) return { joinTokens: [options.joinToken] };
  if (options.adminToken && options.projectId) return { adminToken: options.adminToken, projectId: options.projectId };
  throw new Error("startSimulator needs joinToken(s), adminToken + projectId, or identities");
}
