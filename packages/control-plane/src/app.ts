import compress from "@fastify/compress";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { foldClusterChanges, keelsonSchema, pruneClusterChanges, type Store, storageFull } from "@keelson/db";
import { sql } from "drizzle-orm";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from "fastify";
import { AgentHub, type AgentHubOptions } from "./agents/hub.ts";
import { LinkBook } from "./agents/link-book.ts";
import { defaultLinkLimit, readOpenFileLimit } from "./agents/link-capacity.ts";
import { peerNodeEvents } from "./agents/peer-node-events.ts";
import { installAudit } from "./audit/http.ts";
import { pruneAuditRecords } from "./audit/records.ts";
import type { Keelson } from "./context.ts";
import { loadCatalogue } from "./domain/catalogue/catalogue.ts";
import { CloudClientCache } from "./domain/cloud-providers/client-cache.ts";
import { warmCloudApis } from "./domain/cloud-providers/warm-up.ts";
import { startTokenSweep } from "./domain/clusters/auto-deploy/token-sweep.ts";
import { followClusterHealth } from "./domain/clusters/health/health-follower.ts";
import { EventLog } from "./domain/events/event-log.ts";
import { OpenStreams } from "./domain/events/open-streams.ts";
import { ProjectEventFanout } from "./domain/events/project-events.ts";
import { hostLinkDomain } from "./domain/hosts/link-domain.ts";
import type { PresenceOptions } from "./domain/hosts/presence.ts";
import { IdentityResolver } from "./domain/identity/resolver.ts";
import { hashSecret } from "./domain/identity/token-hash.ts";
import { publishLocalShelves } from "./domain/packages/publish-local.ts";
import { ensureDefaultProject } from "./domain/projects/projects.ts";
import { installAuth } from "./http/auth.ts";
import { stripCompatPrefix } from "./http/compat-prefix.ts";
import { compressPluginOptions } from "./http/encodings.ts";
import { frameworkError, installErrorHandlers } from "./http/error-handler.ts";
import { installJsonBodyParser } from "./http/json-body.ts";
import { installHttpMetrics } from "./metrics/http.ts";
import { commandObserver, observeEvents } from "./metrics/observe.ts";
import { ControlPlaneMetrics } from "./metrics/registry.ts";
import { registerScrapeGauges } from "./metrics/scrape-gauges.ts";
import { registerOperationKinds } from "./operation-kinds.ts";
import { type Channels, channelsOf } from "./replicas/channels.ts";
import { ReplicaDrain } from "./replicas/drain.ts";
import { deregisterReplica, registerReplica, replicaHeartbeat } from "./replicas/registry.ts";
import { replicaSelf } from "./replicas/self.ts";
import { registerRoutes } from "./routes/index.ts";
import { OperationRunner } from "./runner/runner.ts";
import type { ServerSecrets } from "./secrets/server-secrets.ts";
import { defaultServerSettings, type ServerSettings } from "./settings.ts";
import { StorageCondition } from "./storage/condition.ts";
import { logWriteFailure } from "./storage/log-failure.ts";
import type { ServerTls } from "./tls/server-tls.ts";
import { SERVER_VERSION } from "./version.ts";
import { WEBCLI_PATH } from "./webcli/frames.ts";
import { WebCliServer } from "./webcli/server.ts";

export interface AppOptions {
  /** Opened and migrated by the caller, who also closes it after the app. */
  store: Store;
  dataDir: string;
  /** The sealing key, admin token and web CLI key (secrets/server-secrets.ts). */
  secrets: ServerSecrets;
  /** A pino logger of the process (main.ts); tests run silent without one. */
  logger?: FastifyBaseLogger;
  /** false keeps recorded operations pending (tests of resume-after-restart). Default true. */
  runOperations?: boolean;
  /** The parsed settings (main.ts); tests get the defaults, with what they shorten. */
  settings?: ServerSettings;
  /** How often a full storage is probed for space (tests shorten it). */
  storageProbeIntervalMs?: number;
  /** Agent hub tuning beyond the settings (tests shorten the heartbeat below its floor). */
  agentHub?: Omit<AgentHubOptions, "domain" | "log" | "links" | "relay"> & { presence?: PresenceOptions };
  /** HTTPS (KEELSON_TLS=auto or files, tls/server-tls.ts); plain HTTP without it. */
  tls?: ServerTls;
  /** How replicas wake each other; by default the store's (channels.ts). Tests running two apps on one SQLite file pass one to both. */
  channels?: Channels;
  /** The scrape token of /metrics (KEELSON_METRICS_TOKEN_FILE, read by main.ts). */
  scrapeToken?: string;
}

/** How often stored events and cluster-change rows past their retention are deleted (with the replica heartbeat). */
const LOG_PRUNE_INTERVAL_MS = 60_000;

/** Browsers that once saw the API over HTTPS refuse to fall back to plain HTTP for a year. */
const HSTS = "max-age=31536000";

export async function buildApp(options: AppOptions): Promise<FastifyInstance> {
  const settings = options.settings ?? defaultServerSettings();
  const { tls } = options;
  const app = Fastify({
    // HTTP/1.1 only: the agent link is a WebSocket upgrade, which HTTP/2 does not carry.
    ...(tls ? { https: tls.context(), http2: false } : {}),
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    rewriteUrl: stripCompatPrefix,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: "array", useDefaults: true } },
    forceCloseConnections: false,
    return503OnClosing: true,
    // Behind a reverse proxy, X-Forwarded-For counts only from the proxies named (anyone could send one).
    trustProxy: settings.trustProxy ?? false,
    // Malformed URLs (bad percent-encoding and the like) get the API's error shape too.
    frameworkErrors: (error, _request, reply) => {
      const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 400;
      (reply as FastifyReply).code(status).send(frameworkError(status, error));
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const storage = new StorageCondition({
    dataDir: options.dataDir,
    log: app.log,
    ...(options.storageProbeIntervalMs ? { probeIntervalMs: options.storageProbeIntervalMs } : {}),
    // PostgreSQL's disk is its own: a row rewritten in place (one tuple, one WAL record).
    probeDatabase: async () => {
      await options.store.db.update(keelsonSchema).set({ minBinaryVersion: sql`min_binary_version` });
    },
  });
  storage.lookAtStart();
  const replica = replicaSelf(settings, Boolean(tls));
  await registerReplica(options.store.db, replica, settings.operationLeaseMs);
  const replicaBeat = replicaHeartbeat(
    options.store.db,
    replica,
    settings.replicaRetentionMs,
    () => agents.links.open,
    () => void drain.begin("its replicas row says it drains"),
  );
  const channels = options.channels ?? channelsOf(options.store);
  const runner = new OperationRunner(options.store.db, app.log, (full) => storage.full(full), {
    channels,
    replicaId: settings.replicaId,
    leaseMs: settings.operationLeaseMs,
    renewMs: settings.operationLeaseRenewMs,
    deadlineMs: settings.operationLeaseDeadlineMs,
    heartbeat: async () => {
      await replicaBeat();
      await followAdminToken(secrets, identity, app.log);
      // Not part of the renewal: a failure here must not fence the replica.
      await agents
        .reapDeadLinks()
        .catch((err: unknown) => logWriteFailure(app.log, err, {}, "reaping dead replicas' agent links failed"));
      await pruneLogs().catch((err: unknown) =>
        logWriteFailure(app.log, err, {}, "folding or pruning stored events or cluster changes failed"),
      );
    },
  });
  const { secrets } = options;
  const identity = new IdentityResolver(options.store.db, hashSecret(secrets.admin.token));
  const metrics = new ControlPlaneMetrics(settings.replicaId);
  const { presence, ...hubTuning } = options.agentHub ?? {};
  const openFiles = readOpenFileLimit();
  const links = new LinkBook({
    db: options.store.db,
    channels,
    replicaId: settings.replicaId,
    leaseMs: settings.operationLeaseMs,
    log: app.log,
  });
  const agents = new AgentHub({
    heartbeatMs: settings.agentHeartbeatMs,
    linkLimit: settings.agentLinkLimit ?? (openFiles ? defaultLinkLimit(openFiles.soft) : undefined),
    ...hubTuning,
    commands: commandObserver(metrics),
    domain: hostLinkDomain({ db: options.store.db, identity, cipher: secrets.cipher, log: app.log, presence }),
    log: app.log,
    links,
    relay: { db: options.store.db, channels, retentionMs: settings.agentCommandRetentionMinutes * 60_000 },
  });
  await agents.listen();
  const eventLog = new EventLog(options.store.db, settings.replicaId);
  const projectEvents = new ProjectEventFanout({
    runnerEvents: runner.events,
    nodeEvents: agents.nodeEvents.all,
    log: eventLog,
    logger: app.log,
    // SQLite serves one replica: its events are this process's, delivered as recorded.
    ...(options.store.dialect === "postgres" ? { channels, peers: peerNodeEvents(agents) } : {}),
  });
  await projectEvents.start();
  let logsPrunedAt = 0;
  const pruneLogs = async () => {
    // Folds with each heartbeat (2 s by default): the reads of a cluster that keeps changing
    // then count the changes of the last seconds, not of the minute the log keeps.
    await foldClusterChanges(options.store.db);
    // Prunes at most once a minute: a DELETE per renewal would be noise in every rollout.
    if (Date.now() - logsPrunedAt < LOG_PRUNE_INTERVAL_MS) return;
    logsPrunedAt = Date.now();
    await eventLog.prune(settings.eventRetentionMinutes * 60_000, settings.eventRetentionRows);
    await pruneClusterChanges(options.store.db);
  };
  const eventStreams = new OpenStreams();
  const drain = new ReplicaDrain({
    db: options.store.db,
    channels,
    replicaId: settings.replicaId,
    leaseMs: settings.operationLeaseMs,
    log: app.log,
    runner,
    agents,
    streams: eventStreams,
  });
  await drain.listen();
  await startWrite(storage, app.log, "marking hosts disconnected", () => agents.resetStalePresence());
  agents.attach(app.server);
  const keelson: Keelson = {
    settings,
    store: options.store,
    db: options.store.db,
    dataDir: options.dataDir,
    cipher: secrets.cipher,
    catalogue: loadCatalogue(),
    identity,
    adminToken: secrets.admin,
    webcliKey: secrets.webcliKey,
    runner,
    drain,
    log: app.log,
    agents,
    eventLog,
    eventStreams,
    projectEvents,
    storage,
    tls,
    cloudClients: new CloudClientCache(),
    metrics,
  };
  app.decorate("keelson", keelson);
  const webcli = new WebCliServer(keelson);
  agents.serveUpgrade(WEBCLI_PATH, webcli.onUpgrade);
  app.addHook("onClose", async () => keelson.cloudClients.destroy());
  void warmCloudApis(keelson.db, app.log);
  await ensureDefaultProject(keelson);
  registerOperationKinds(keelson);
  const stopFollowingHealth = followClusterHealth(keelson);
  const stopObserving = observeEvents(metrics, { nodeEvents: agents.nodeEvents, runner });
  registerScrapeGauges(metrics, keelson);

  if (tls) {
    app.addHook("onSend", async (_request, reply) => {
      reply.header("strict-transport-security", HSTS);
    });
    const stopRenewing = tls.keepFresh(app.server as unknown as import("node:tls").Server, app.log);
    app.addHook("onClose", async () => stopRenewing());
  }
  installErrorHandlers(app);
  installJsonBodyParser(app);
  installAudit(app, keelson.db);
  installAuth(app, keelson.identity, options.scrapeToken);
  installHttpMetrics(app, metrics);
  // Before the routes: it adds its hook to each route as the route is declared.
  await app.register(compress, compressPluginOptions);
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Keelson cluster-management API",
        version: SERVER_VERSION,
        description:
          "Versions v4, v3 and v1 of the cluster-management interface plus Keelson's extensions. " +
          "Every path is also served under the /qbert prefix (for example /qbert/v4/{projectId}/clusters).",
      },
      components: {
        securitySchemes: { authToken: { type: "apiKey", in: "header", name: "X-Auth-Token" } },
      },
      security: [{ authToken: [] }],
    },
  });
  await app.register(swaggerUi, { routePrefix: "/docs", uiConfig: { docExpansion: "list" } });
  await app.register(registerRoutes);
  app.get("/openapi.json", { config: { auth: "public" }, schema: { hide: true } }, async () => app.swagger());

  // Audit records past their retention go hourly (and at start); a failed prune tries again next hour.
  const prune = () =>
    pruneAuditRecords(keelson.db, settings.auditRetentionDays).catch((err) =>
      logWriteFailure(app.log, err, {}, "pruning the audit trail failed"),
    );
  let pruning: NodeJS.Timeout | undefined;
  let stopTokenSweep = () => {};
  app.addHook("onReady", async () => {
    if (options.runOperations !== false) {
      await runner.start();
      stopTokenSweep = startTokenSweep(keelson, app.log);
    }
    await prune();
    pruning = setInterval(prune, 3_600_000).unref();
    await publishLocalShelves(keelson).catch((err: unknown) =>
      logWriteFailure(app.log, err, {}, "storing the data dir's packages in the database failed"),
    );
  });
  app.addHook("preClose", async () => {
    clearInterval(pruning);
    await drain.close();
    stopTokenSweep();
    await runner.stop();
    await deregisterReplica(options.store.db, replica).catch((err) =>
      logWriteFailure(app.log, err, {}, "removing this replica's row failed"),
    );
    stopFollowingHealth();
    stopObserving();
    await webcli.close();
    // Drain the agent links with going-away before the listener stops.
    await agents.close();
    await projectEvents.stop();
    storage.close();
  });
  return app;
}

/**
 * A rotation on another replica reaches this one at its next renewal: the old admin token stops
 * working here too. Not part of the renewal's failure: a read that fails tries again next time.
 */
async function followAdminToken(
  secrets: ServerSecrets,
  identity: IdentityResolver,
  log: FastifyBaseLogger,
): Promise<void> {
  if (!secrets.currentAdminToken) return;
  try {
    const token = await secrets.currentAdminToken();
    if (token !== undefined) identity.replaceAdminHash(hashSecret(token));
  } catch (err) {
    logWriteFailure(log, err, {}, "reading the shared admin token failed");
  }
}

/**
 * A write the start makes only to tidy up (nothing depends on it at once): on a full disk the
 * server starts anyway, in the storage-full state, and makes the write once space returns.
 */
async function startWrite(
  storage: StorageCondition,
  log: FastifyBaseLogger,
  what: string,
  write: () => Promise<void>,
): Promise<void> {
  try {
    await write();
  } catch (err) {
    const full = storageFull(err);
    if (!full) throw err;
    storage.full(full);
    log.warn({ reason: full.reason }, `${what} put off until the storage has room`);
    storage.whenCleared(() => {
      write().catch((again: unknown) => log.error({ err: again }, `${what} failed`));
    });
  }
}
