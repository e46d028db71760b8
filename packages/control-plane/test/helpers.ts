import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Db, firstRow, openStore, projects, type Store, tokens } from "@keelson/db";
import { eq } from "drizzle-orm";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";
import { onTestFinished } from "vitest";
import { type AppOptions, buildApp } from "../src/app.ts";
import { generateSecret, hashSecret } from "../src/domain/identity/token-hash.ts";
import { createProject, defaultProjectId } from "../src/domain/projects/projects.ts";
import { SecretCipher } from "../src/secrets/cipher.ts";
import { defaultServerSettings, type ServerSettings } from "../src/settings.ts";

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

export async function mintProjectToken(db: Db, projectId: string): Promise<string> {
  const token = generateSecret("kpt");
  await db
    .insert(tokens)
    .values({ id: randomUUID(), projectId, kind: "project", name: "test", tokenHash: hashSecret(token) });
  return token;
}

const cipherKey = Buffer.alloc(32, 7);

/**
 * A control plane on a SQLite file in a temporary data dir (a file, not :memory:, so a test
 * can restart the server on the same data).
 */
export async function createTestApp(
  options: {
    runOperations?: boolean;
    dataDir?: string;
    agentHub?: AppOptions["agentHub"];
    settings?: Partial<ServerSettings>;
  } = {},
): Promise<TestApp> {
  const settings: MutableSettings = { ...defaultServerSettings(), ...options.settings };
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "keelson-test-"));
  const store = await openStore({ dialect: "sqlite", file: join(dataDir, "keelson.sqlite"), binaryVersion: "0.1.0" });
  const db = store.db;
  const app = await buildApp({
    store,
    dataDir,
    adminToken: ADMIN_TOKEN,
    cipher: new SecretCipher(cipherKey),
    runOperations: options.runOperations ?? true,
    settings,
    ...(options.agentHub ? { agentHub: options.agentHub } : {}),
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
        if (!keepFiles) rmSync(dataDir, { recursive: true, force: true });
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
