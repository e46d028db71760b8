import { DatabaseUnavailableError, openStore, SchemaTooNewError, type Store, storageFull } from "@keelson/db";
import { setOutgoingFrameChecks } from "@keelson/protocol";
import { SETTINGS_EXIT_CODE, SettingsError } from "@keelson/settings";
import closeWithGrace from "close-with-grace";
import pino from "pino";
import { raiseOpenFileLimit } from "./agents/link-capacity.ts";
import { buildApp } from "./app.ts";
import { databaseLabel, storeOptions } from "./database.ts";
import { defaultProjectId } from "./domain/projects/projects.ts";
import { readScrapeToken } from "./metrics/scrape-token.ts";
import { ReplicaRefused } from "./replicas/registry.ts";
import { loadServerSecrets, type ServerSecrets } from "./secrets/server-secrets.ts";
import { readServerSettings, type ServerSettings } from "./settings.ts";
import { serializeError } from "./storage/log-errors.ts";
import { insecureHttpWarning } from "./tls/mode.ts";
import { prepareServerTls, type ServerTls } from "./tls/server-tls.ts";

let config: ServerSettings;
try {
  config = readServerSettings(process.env, process.argv.slice(2));
} catch (err) {
  if (!(err instanceof SettingsError)) throw err;
  process.stderr.write(`keelson-server: ${err.message}\n`);
  process.exit(SETTINGS_EXIT_CODE);
}
setOutgoingFrameChecks(config.nodeEnv !== "production");
const logger = pino({
  level: config.logLevel,
  serializers: { err: serializeError },
  ...(process.stdout.isTTY ? { transport: { target: "pino-pretty", options: { translateTime: "SYS:HH:MM:ss" } } } : {}),
});

const insecure = insecureHttpWarning(config);
if (insecure) logger.warn({ listen: config.listen }, insecure);
let scrapeToken: string | undefined;
try {
  scrapeToken = readScrapeToken(config);
} catch (err) {
  if (!(err instanceof SettingsError)) throw err;
  process.stderr.write(`keelson-server: ${err.message}\n`);
  process.exit(SETTINGS_EXIT_CODE);
}

// Every agent link is a file descriptor: take all the process may have (the hard limit).
const raised = raiseOpenFileLimit();
if (raised.problem) logger.warn({ openFiles: raised.limit, problem: raised.problem }, "open-file limit not raised");

const database = databaseLabel(config);
let store: Store;
try {
  store = await openStore(storeOptions(config, logger));
} catch (err) {
  if (err instanceof SettingsError) {
    process.stderr.write(`keelson-server: ${err.message}\n`);
    process.exit(SETTINGS_EXIT_CODE);
  }
  if (err instanceof SchemaTooNewError) {
    logger.fatal({ database, required: err.required, binary: err.binary }, err.message);
  } else if (storageFull(err)) {
    exitStorageFull(err);
  } else if (err instanceof DatabaseUnavailableError) {
    logger.fatal(
      { database: err.target, answer: err.answer, code: err.code },
      `cannot use the database: ${err.message}`,
    );
  } else throw err;
  process.exit(1);
}
/**
 * What cannot start without space: a new database's first migration, or a secret made on a
 * first start. Everything an existing data dir needs is only read, so a restart on a full disk
 * serves reads; this is for a data dir that was never complete. One log line, no stack.
 */
function exitStorageFull(err: unknown): never {
  logger.fatal(
    { dataDir: config.dataDir, reason: storageFull(err)?.reason },
    `cannot start: the data dir ${config.dataDir} is full and this start needs to write there; free space and start again`,
  );
  process.exit(1);
}

const db = store.db;
let secrets: ServerSecrets;
let tls: ServerTls | undefined;
let app: Awaited<ReturnType<typeof buildApp>>;
try {
  secrets = await loadServerSecrets(store, config);
  // After the secrets: on PostgreSQL the CA of KEELSON_TLS=auto is one of them.
  tls = await prepareServerTls(config, secrets);
  app = await buildApp({
    store,
    dataDir: config.dataDir,
    secrets,
    logger,
    settings: config,
    ...(tls ? { tls } : {}),
    ...(scrapeToken ? { scrapeToken } : {}),
  });
} catch (err) {
  if (err instanceof ReplicaRefused || err instanceof SettingsError) {
    await store.close().catch(() => undefined);
    process.stderr.write(`keelson-server: ${err.message}\n`);
    process.exit(SETTINGS_EXIT_CODE);
  }
  if (!storageFull(err)) throw err;
  await store.close().catch(() => undefined);
  exitStorageFull(err);
}

closeWithGrace({ delay: 15_000, logger }, async ({ signal, err }) => {
  if (err) logger.error({ err }, "shutting down after an error");
  else logger.info({ signal }, "shutting down");
  // Fastify's close waits for in-flight requests and runs preClose hooks (operations, agent hub).
  await app.close();
  await store.close();
});

// Node's default accept queue is 511 connections. Agents that all reconnect at once (a restart,
// a network outage) overflowed it in the 45,000-agent bench: the kernel drops the extra SYNs,
// clients resend them after 1, 3, 7 s, and the handshakes time out. The kernel caps the queue
// at net.core.somaxconn (4,096 on current kernels), which is the operator's to raise.
const LISTEN_BACKLOG = 65_535;
const address = await app.listen({ host: config.host, port: config.port, backlog: LISTEN_BACKLOG });
logger.info(
  {
    url: address,
    tls: config.tlsMode,
    ...(tls?.caCertHash ? { caCertHash: tls.caCertHash } : {}),
    database,
    adminToken: secrets.admin.file ?? "from KEELSON_ADMIN_TOKEN",
    defaultProjectId: await defaultProjectId(db),
  },
  "keelson-server ready",
);
// One plain summary for a person at a terminal; the JSON log line above carries the same facts.
if (process.stdout.isTTY || config.printSummary) {
  process.stdout.write(
    [
      "",
      `Keelson control plane listening on ${address}`,
      `  admin token:        ${secrets.admin.file ? `cat ${secrets.admin.file}` : "(from KEELSON_ADMIN_TOKEN)"}`,
      `  default project id: ${await defaultProjectId(db)}`,
      `  API docs:           ${address}/docs`,
      ...(tls?.caCertHash
        ? [`  CA hash:            ${tls.caCertHash} (KEELSON_CA_HASH for agents; CA at ${address}/v1/ca)`]
        : []),
      "",
    ].join("\n"),
  );
}
