import { buildHostRecord, type HelloPayload } from "@keelson/protocol";
import pino from "pino";
import { EtcdBackups, readBackupMinuteMs } from "./backups/index.ts";
import { ConfigError, readAgentConfig } from "./config.ts";
import { FactsMonitor } from "./facts.ts";
import { LinkClient } from "./link/index.ts";
import { buildLocalApi } from "./local-api/server.ts";
import { TokenCheck } from "./local-api/token-check.ts";
import {
  bouncerVerifyUrl,
  NodeController,
  NodeEnvError,
  readNodeTuning,
  registerBouncerEndpoint,
} from "./node/index.ts";
import { ensureRegistered, RegistrationError } from "./registration.ts";
import { createServiceManager } from "./services/index.ts";
import { StateDir } from "./state-dir.ts";
import { AUTH_EXIT_CODE, CONFIG_EXIT_CODE, notifyReady, RESTART_EXIT_CODE } from "./upgrade/ipc.ts";
import { validateUpgradeRequest } from "./upgrade/request.ts";
import { Upgrader } from "./upgrade/upgrader.ts";
import { AGENT_VERSION } from "./version.ts";

/**
 * keelson-agent's process: registration, host facts, the link, the local API and the
 * self-upgrade, wired together. Exit codes tell the launcher and systemd what happened:
 * 0 stopped, RESTART_EXIT_CODE start me again (new version), AUTH_EXIT_CODE refused by the
 * control plane, CONFIG_EXIT_CODE bad configuration (upgrade/ipc.ts).
 */
if (process.argv.includes("--version")) {
  process.stdout.write(`${AGENT_VERSION}\n`);
  process.exit(0);
}

const bootLog = pino({ name: "keelson-agent", level: process.env.KEELSON_LOG_LEVEL?.trim() || "info" });

let config: ReturnType<typeof readAgentConfig>;
let nodeTuning: ReturnType<typeof readNodeTuning>;
let backupMinuteMs: number;
try {
  config = readAgentConfig(process.env, process.argv.slice(2));
  nodeTuning = readNodeTuning(process.env);
  backupMinuteMs = readBackupMinuteMs(process.env);
} catch (err) {
  if (!(err instanceof ConfigError) && !(err instanceof NodeEnvError)) throw err;
  bootLog.fatal(err.message);
  process.exit(CONFIG_EXIT_CODE);
}

const baseLog = pino({ name: "keelson-agent", level: config.logLevel });
const stateDir = new StateDir(config.stateDir).ensure();
const localToken = stateDir.ensureLocalApiToken();

// Stop signals may come while registration still retries an unreachable control plane.
const starting = new AbortController();
let stop: ((reason: string, code: number) => Promise<never>) | undefined;
const onStopRequest = (reason: string) => {
  if (stop) void stop(reason, 0);
  else starting.abort(new Error(reason));
};
process.on("SIGTERM", () => onStopRequest("SIGTERM"));
process.on("SIGINT", () => onStopRequest("SIGINT"));
// The launcher went away (killed): an agent nobody supervises must not linger.
process.on("disconnect", () => onStopRequest("launcher gone"));

const facts = new FactsMonitor({ hostname: config.hostname, primaryIp: config.primaryIp, agentVersion: AGENT_VERSION });
const first = (await facts.collect()).facts;

let identity: Awaited<ReturnType<typeof ensureRegistered>>;
try {
  identity = await ensureRegistered({
    controlPlane: config.controlPlane,
    stateDir: config.stateDir,
    joinToken: config.joinToken,
    hostname: first.hostname,
    primaryIp: first.primaryIp,
    agentVersion: AGENT_VERSION,
    log: baseLog,
    signal: starting.signal,
    backoff: config.reconnect,
  });
} catch (err) {
  if (starting.signal.aborted) {
    baseLog.info({ reason: (starting.signal.reason as Error).message }, "stopped before registering");
    process.exit(0);
  }
  if (err instanceof RegistrationError) {
    baseLog.fatal({ code: err.code }, `cannot start: ${err.message}`);
    process.exit(err.code === "join_token_missing" ? CONFIG_EXIT_CODE : AUTH_EXIT_CODE);
  }
  throw err;
}

const log = baseLog.child({ hostId: identity.hostId });
const hostId = identity.hostId;
let linkUp = false;
let lastSeen: string | null = null;
let apiListening = false;
let readySent = false;
let bouncerUrl: string | undefined;

const upgrader: Upgrader = new Upgrader({
  stateDir,
  currentVersion: AGENT_VERSION,
  log,
  onChange: ({ status, error }) => {
    link.sendStatus({
      agentStatus: status,
      agentVersion: AGENT_VERSION,
      ...(error ? { agentError: clip(error) } : {}),
    });
  },
  restart: (version) => stopProcess(`restarting on version ${version}`, RESTART_EXIT_CODE),
});

const hello = (): HelloPayload => ({
  hostId,
  agentVersion: AGENT_VERSION,
  hostname: facts.current.hostname,
  primaryIp: facts.current.primaryIp,
  facts: facts.current,
  agentStatus: upgrader.status,
  ...(upgrader.error ? { agentError: clip(upgrader.error) } : {}),
});

const link: LinkClient = new LinkClient({
  url: config.controlPlane,
  hostId,
  credential: identity.credential,
  stateDir: config.stateDir,
  // Not `log`: the link's own lines already carry the host id where it matters.
  log: baseLog.child({ component: "link" }),
  hello,
  backoff: config.reconnect,
  handlers: {
    ping: async () => ({ at: new Date().toISOString() }),
    // Answers at once; the upgrade continues in the background and reports through status.
    "agent.upgrade": async (payload) => upgrader.start(validateUpgradeRequest(payload)),
    // Accepted at once (the phases run on and report through node.report); leave answers when clean.
    "node.join": async (payload) => node.join(payload),
    "node.leave": async (payload, ctx) => node.leave(payload, ctx.signal),
    "node.settings": async (payload) => node.settings(payload),
    "node.restart": async (payload, ctx) => node.restart(payload, ctx.signal),
    "node.upgrade": async (payload, ctx) => node.upgrade(payload, ctx.signal),
    "node.prefetch": async (payload, ctx) => node.prefetch(payload, ctx.signal),
  },
});

const backups = new EtcdBackups({
  log: log.child({ component: "backups" }),
  send: (report) => link.sendBackupReport(report),
  minuteMs: backupMinuteMs,
});

const node: NodeController = new NodeController({
  stateDir: config.stateDir,
  nodePackage: config.nodePackage,
  controlPlane: config.controlPlane,
  hostRoot: config.hostRoot,
  host: () => ({ hostId, hostname: facts.current.hostname, primaryIp: facts.current.primaryIp }),
  link,
  services: () =>
    createServiceManager({
      hostRoot: config.hostRoot,
      override: process.env.KEELSON_SERVICE_MANAGER?.trim() || undefined,
      log: log.child({ component: "services" }),
    }),
  log: log.child({ component: "node" }),
  tuning: nodeTuning,
  bouncerVerifyUrl: () => bouncerUrl,
  backups,
});

link.on("connected", () => {
  linkUp = true;
  node.connected();
  backups.connected();
  signalReady();
});
link.on("disconnected", (info) => {
  linkUp = false;
  lastSeen = new Date().toISOString();
  log.warn(info, "link to the control plane lost");
});
link.on("fatal", (info) => {
  log.fatal(
    { code: info.code, codeName: info.codeName, reason: info.reason },
    `the control plane refused this agent (${info.codeName}: ${info.reason}); a restart cannot fix that, exiting`,
  );
  void stopProcess("refused by the control plane", AUTH_EXIT_CODE);
});

const api = buildLocalApi({
  hostId,
  tokens: new TokenCheck({ localToken, verify: (token) => link.verifyProjectToken(token) }),
  hostRecord: () => {
    const membership = node.snapshot();
    return buildHostRecord({
      id: hostId,
      facts: facts.current,
      responding: linkUp,
      lastSeen,
      agentVersion: AGENT_VERSION,
      agentStatus: upgrader.status,
      agentError: upgrader.error ?? null,
      roles: [],
      nodeStatus: membership.nodeStatus,
      clusterUuid: membership.clusterId,
      phases: membership.phases,
    });
  },
  upgrade: (body) => upgrader.start(validateUpgradeRequest(body)),
  log: log.child({ component: "local-api" }),
});
const bouncerEndpoint = registerBouncerEndpoint(api, {
  stateDir,
  verify: (token) => link.verifyClusterToken(token),
});

let stopping: Promise<never> | undefined;
function stopProcess(reason: string, code: number): Promise<never> {
  stopping ??= (async () => {
    log.info({ reason, exitCode: code }, "stopping");
    // A stop that hangs (a stuck download, a peer that never closes) must not keep the host's
    // agent from restarting: give up after a while and exit anyway.
    setTimeout(() => {
      log.error("graceful stop took too long; exiting");
      process.exit(code);
    }, 20_000).unref();
    facts.stop();
    await upgrader.abort();
    // A join or leave still running gets the link's grace period, then its abort signal.
    await link.stop({ graceMs: 5_000 });
    // The node's services keep running (like systemd units); the next start picks them up.
    await node.close();
    await backups.close();
    await api.close();
    process.exit(code);
  })();
  return stopping;
}
stop = stopProcess;
if (starting.signal.aborted) await stopProcess((starting.signal.reason as Error).message, 0);

try {
  await api.listen({ host: config.listen.host, port: config.listen.port });
} catch (err) {
  log.fatal({ err, listen: config.listen }, `cannot listen on ${config.listen.host}:${config.listen.port}`);
  process.exit(1);
}
apiListening = true;
const bound = api.server.address();
bouncerUrl = bouncerVerifyUrl(
  { host: config.listen.host, port: typeof bound === "object" && bound ? bound.port : config.listen.port },
  bouncerEndpoint.path,
);
log.info(
  { listen: `${config.listen.host}:${config.listen.port}`, version: AGENT_VERSION, stateDir: config.stateDir },
  "keelson-agent started",
);
facts.start(
  config.factsIntervalMs,
  (changed) => {
    log.info("host facts changed");
    link.sendFacts(changed);
  },
  (err) => log.warn({ err }, "collecting host facts failed"),
);
link.start();
// A host that is a node of a cluster keeps running its phases across agent restarts. A resume
// that fails (its node package gone from the state dir while the control plane is unreachable)
// is tried again: the node's services keep running meanwhile, unwatched.
const RESUME_RETRY_MS = 15_000;
function resumeNode(): void {
  node.resume().catch((err) => {
    log.error({ err, retryInMs: RESUME_RETRY_MS }, "resuming the node failed; trying again");
    setTimeout(resumeNode, RESUME_RETRY_MS).unref();
  });
}
resumeNode();

/** The launcher keeps a freshly upgraded version only once it is up: API listening, link welcomed. */
function signalReady(): void {
  if (readySent || !apiListening || !linkUp) return;
  readySent = true;
  notifyReady(AGENT_VERSION);
}

function clip(text: string): string {
  return text.length > 4096 ? `${text.slice(0, 4093)}...` : text;
}
