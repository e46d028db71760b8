import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, firstRow, openStore, parseDatabaseUrl, projects, type Store, tokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { inject, onTestFinished } from "vitest";
import { databaseFor, dropDatabaseFor } from "../../../test/support/postgres-database.ts";
import { type AppOptions, buildApp } from "../src/app.ts";
import { adminTokenInFile, configuredAdminToken } from "../src/domain/identity/admin-token.ts";
import type { ProjectRole } from "../src/domain/identity/roles.ts";
import { generateSecret, hashSecret } from "../src/domain/identity/token-hash.ts";
import { createProject, defaultProjectId } from "../src/domain/projects/projects.ts";
import { loadWebCliKey } from "../src/domain/webcli/key.ts";
import { SecretCipher } from "../src/secrets/cipher.ts";
import { defaultServerSettings, type ServerSettings } from "../src/settings.ts";
import { SERVER_VERSION } from "../src/version.ts";

/** The server's settings as a test may change them between tests (timeouts read at use time). */
export type MutableSettings = { -readonly [K in keyof ServerSettings]: ServerSettings[K] };

export const ADMIN_TOKEN = "test-admin-token";

export interface TestApp {
  app: FastifyInstance;
  /** The app's store and its query builders. */
  store: Store;
  db: Db;
  dataDir: string;
  projectId: string;
  /** The app's settings object: a test may shorten a timeout and must put it back. */
  settings: MutableSettings;
  /** A project token of `projectId`. */
  token: string;
  /** Another project and its token, for 403 checks across projects. */
  otherProjectId: string;
  otherToken: string;
  request(options: InjectOptions & { token?: string | null }): Promise<LightMyRequestResponse>;
  /**
   * Close the app (and database); with `keepFiles` the data dir survives for a restart. Apps
   * made inside a test close themselves when it ends; closing again does nothing.
   */
  close(keepFiles?: boolean): Promise<void>;
}

/** A project token; `admin` by default, so a test's token may do everything in its project. */
export async function mintProjectToken(db: Db, projectId: string, role: ProjectRole = "admin"): Promise<string> {
  const token = generateSecret("kpt");
  await db
    .insert(tokens)
    .values({ id: randomUUID(), projectId, kind: "project", name: "test", role, tokenHash: hashSecret(token) });
  return token;
}

const cipherKey = Buffer.alloc(32, 7);

/** The dialect this run's project tests on (vitest.config.ts runs the control plane's tests on each). */
export const TEST_DIALECT = inject("storeDialect") ?? "sqlite";

/** The store of a test app's data dir, as createTestApp opens it (also to look at the data of a stopped app). */
export async function openTestStore(dataDir: string): Promise<Store> {
  if (TEST_DIALECT === "sqlite") {
    return openStore({ dialect: "sqlite", file: join(dataDir, "keelson.sqlite"), binaryVersion: SERVER_VERSION });
  }
  const url = await databaseFor(dataDir);
  return openStore({
    dialect: "postgres",
    target: parseDatabaseUrl(url),
    poolSize: 10,
    statementTimeoutMs: 20_000,
    connectTimeoutMs: 5_000,
    startTimeoutMs: 0,
    applicationName: "keelson-test",
    binaryVersion: SERVER_VERSION,
  });
}

/** Removes what openTestStore made for a data dir. */
async function removeTestData(dataDir: string): Promise<void> {
  rmSync(dataDir, { recursive: true, force: true });
  await dropDatabaseFor(dataDir);
}

/**
 * Where test apps send AWS calls unless a test points them at the AWS stand-in
 * (test/aws-standin): a closed loopback port, so no test ever reaches AWS itself. Azure and GCP
 * calls likewise (Azure takes https endpoints only); a GCP key's token_uri is the test's own.
 */
export const NO_CLOUD = "http://127.0.0.1:9";
const NO_CLOUD_SETTINGS = {
  awsEndpointUrl: NO_CLOUD,
  azureAuthorityHost: "https://127.0.0.1:9",
  azureResourceManagerUrl: "https://127.0.0.1:9",
  gcpComputeEndpoint: NO_CLOUD,
};

/**
 * A control plane in a temporary data dir, on the run's dialect: a SQLite file there (a file,
 * not :memory:, so a test can restart the server on the same data) or a PostgreSQL database of
 * its own, kept for the same data dir.
 */
export async function createTestApp(
  options: {
    runOperations?: boolean;
    dataDir?: string;
    /** The data dir whose database the app opens: another app's, for replicas with data dirs of their own. Default: its own. */
    databaseOf?: string;
    agentHub?: AppOptions["agentHub"];
    settings?: Partial<ServerSettings>;
    /** An admin-token file (rotation rewrites it); by default the token is ADMIN_TOKEN, as if configured. */
    adminTokenFile?: string;
    storageProbeIntervalMs?: number;
    tls?: AppOptions["tls"];
    scrapeToken?: string;
    channels?: AppOptions["channels"];
    /** The app's secrets (server-secrets.ts); by default a fixed cipher, ADMIN_TOKEN and the data dir's web CLI key. */
    secrets?: AppOptions["secrets"];
  } = {},
): Promise<TestApp> {
  const settings: MutableSettings = { ...defaultServerSettings(), ...NO_CLOUD_SETTINGS, ...options.settings };
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "keelson-test-"));
  const store = await openTestStore(options.databaseOf ?? dataDir);
  const db = store.db;
  const app = await buildApp({
    store,
    dataDir,
    secrets: options.secrets ?? {
      cipher: new SecretCipher(cipherKey),
      admin: options.adminTokenFile
        ? adminTokenInFile(ADMIN_TOKEN, options.adminTokenFile)
        : configuredAdminToken(ADMIN_TOKEN),
      webcliKey: loadWebCliKey(dataDir),
    },
    runOperations: options.runOperations ?? true,
    settings,
    ...(options.agentHub ? { agentHub: options.agentHub } : {}),
    ...(options.storageProbeIntervalMs ? { storageProbeIntervalMs: options.storageProbeIntervalMs } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.scrapeToken ? { scrapeToken: options.scrapeToken } : {}),
    ...(options.channels ? { channels: options.channels } : {}),
  });
  await app.ready();
  const projectId = (await defaultProjectId(db)) as string;
  const other =
    firstRow(await db.select({ id: projects.id }).from(projects).where(eq(projects.name, "other"))) ??
    (await createProject(db, "other"));
  const token = await mintProjectToken(db, projectId);
  const otherToken = await mintProjectToken(db, other.id);
  let closing: Promise<void> | undefined;
  const testApp: TestApp = {
    app,
    store,
    db,
    dataDir,
    projectId,
    settings,
    token,
    otherProjectId: other.id,
    otherToken,
    request: ({ token: t, headers, ...rest }) =>
      app.inject({
        ...rest,
        headers: { ...(headers ?? {}), ...(t === null ? {} : { "x-auth-token": t ?? token }) },
      }),
    close(keepFiles = false) {
      closing ??= (async () => {
        await app.close();
        await store.close();
        if (!keepFiles) await removeTestData(dataDir);
      })();
      return closing;
    },
  };
  closeAfterTest(testApp);
  return testApp;
}

/**
 * An app made inside a test closes itself when that test ends, passed or failed (as
 * fastify/demo's helper does with `t.after`). One made in a beforeAll or beforeEach hook is
 * the suite's: its afterAll or afterEach closes it. Closing twice is harmless, so a test may
 * still close early (to restart on the same data dir with `keepFiles`).
 */
function closeAfterTest(t: TestApp): void {
  try {
    onTestFinished(() => t.close());
  } catch {
    // Not inside a test: created by a hook, closed by its pair.
  }
}
