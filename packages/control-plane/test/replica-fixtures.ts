import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { databaseTime, dialectOf, replicas, type Store } from "@keelson/db";
import { AGENT_LINK_PATH } from "@keelson/protocol";
import { registerFleet, SimAgent, type SimBehaviour } from "../../../test/sim/index.ts";
import { dropDatabaseFor } from "../../../test/support/postgres-database.ts";
import { inProcessChannels } from "../src/replicas/channels.ts";
import type { ServerSettings } from "../src/settings.ts";
import { ADMIN_TOKEN, createTestApp, openTestStore, TEST_DIALECT, type TestApp } from "./helpers.ts";

/** Control planes as replicas of one database, and agents linked to one of them (agent-links, agent-commands tests). */

export const SHORT = { operationLeaseMs: 3_000, operationLeaseRenewMs: 100, operationLeaseDeadlineMs: 600 };

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A replica row heartbeating `agoMs` ago by the database's clock (of this process, which SQLite's one-server check allows). */
export async function replicaRow(t: TestApp, id: string, agoMs: number): Promise<void> {
  const at = databaseTime(dialectOf(t.db), -agoMs);
  await t.db.insert(replicas).values({
    id,
    url: "http://10.0.0.9:8080",
    version: "0.1.0",
    host: hostname(),
    pid: process.pid,
    startedAt: at,
    heartbeatAt: at,
  });
}

/**
 * `n` stores on one fresh database (a second connection to the SQLite file, or a second pool on
 * PostgreSQL, as two control-plane processes have), closed and the database dropped by the
 * cleanup pushed on `cleanups`.
 */
export async function storesOnOneDatabase(n: number, cleanups: (() => Promise<void>)[]): Promise<Store[]> {
  const dataDir = mkdtempSync(join(tmpdir(), "keelson-replicas-"));
  const stores: Store[] = [];
  for (let i = 0; i < n; i++) stores.push(await openTestStore(dataDir));
  cleanups.push(async () => {
    for (const s of stores) await s.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (TEST_DIALECT === "postgres") await dropDatabaseFor(dataDir);
  });
  return stores;
}

export async function listening(t: TestApp): Promise<{ base: string; link: string }> {
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = t.app.server.address() as AddressInfo;
  return { base: `http://127.0.0.1:${port}`, link: `ws://127.0.0.1:${port}${AGENT_LINK_PATH}` };
}

export function agentOn(
  link: string | string[],
  id: { hostId: string; credential: string },
  behaviour: Partial<SimBehaviour> = {},
  index = 1,
): SimAgent {
  return new SimAgent({
    index,
    hostname: `worker-${index}`,
    hostId: id.hostId,
    credential: id.credential,
    linkUrl: link,
    behaviour: { latencyMs: 0, failureRate: 0, random: Math.random, reconnect: false, phaseTimeMs: 0, ...behaviour },
  });
}

/**
 * Two control planes on one database (on SQLite one file, sharing in-process channels as one
 * process would), with `settings` both; `bRunsOperations: false` leaves every operation to A.
 * `ownDataDirs` gives B a data dir of its own, as a replica on another machine has (its
 * package shelves, its files); by default both share A's.
 */
export async function twoReplicas(
  settings: Partial<ServerSettings> = {},
  { bRunsOperations = true, ownDataDirs = false } = {},
): Promise<[TestApp, TestApp]> {
  // On PostgreSQL each app has its own LISTEN connection, as two processes would.
  const channels = TEST_DIALECT === "sqlite" ? inProcessChannels() : undefined;
  const a = await createTestApp({
    ...(channels ? { channels } : {}),
    settings: { ...SHORT, ...settings, replicaId: "cp-a" },
  });
  const b = await createTestApp({
    ...(channels ? { channels } : {}),
    runOperations: bRunsOperations,
    ...(ownDataDirs ? { databaseOf: a.dataDir } : { dataDir: a.dataDir }),
    settings: { ...SHORT, ...settings, replicaId: "cp-b" },
  });
  // The second closes first and keeps the shared data (its own data dir it removes); the first removes it.
  const closeB = b.close.bind(b);
  b.close = () => closeB(!ownDataDirs);
  return [a, b];
}

/** Two replicas listening on loopback, and one host registered (not linked yet). */
export async function twoReplicasAndAHost() {
  const [a, b] = await twoReplicas();
  const onA = await listening(a);
  const onB = await listening(b);
  const [id] = await registerFleet(onA.base, ["worker-1"], { adminToken: ADMIN_TOKEN, projectId: a.projectId });
  if (!id) throw new Error("no host registered");
  return { a, b, onA, onB, id };
}
