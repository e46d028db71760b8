/**
 * `pnpm bench store`: the cost of a drizzle query against the raw better-sqlite3 statement
 * it compiles to (the baseline, same run), for the hot single-row reads and writes of the
 * agent link (a node's project, presence). Decides where raw SQL through `$client` is worth it.
 * Then the same read through the asynchronous store (packages/db/src/store) on SQLite and on a
 * real PostgreSQL server the bench starts (test/support/postgres.ts), one awaited query at a time.
 */
import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import {
  cloudProviders,
  type Db,
  firstRow,
  MIGRATIONS,
  nodePools,
  nodes,
  openSqliteConnection,
  openStore,
  parseDatabaseUrl,
  projects,
  type Store,
  schema,
  type Tx,
} from "../../../packages/db/src/index.ts";
import { startPostgres } from "../../support/postgres.ts";

// The synchronous baselines: better-sqlite3 itself, and drizzle's synchronous driver on it.
const connection = openSqliteConnection(":memory:");
const db = drizzle(connection, { schema });
migrate(db, { migrationsFolder: MIGRATIONS.sqlite });
// Rows stand alone here: only the statements are measured.
connection.pragma("foreign_keys = OFF");
const projectId = randomUUID();
await db.insert(projects).values({ id: projectId, name: "p" });
const ids: string[] = [];
for (let i = 0; i < 1000; i++) {
  const id = randomUUID();
  ids.push(id);
  await db
    .insert(nodes)
    .values({ id, projectId, name: `n${i}`, credentialHash: randomUUID(), nodePoolId: randomUUID() } as never);
}
const raw = connection.prepare<[string], { project_id: string }>("SELECT project_id FROM nodes WHERE id = ?");
const prepared = db
  .select({ projectId: nodes.projectId })
  .from(nodes)
  .where(eq(nodes.id, sql.placeholder("id")))
  .prepare();
const rawTouch = connection.prepare("UPDATE nodes SET last_seen = ? WHERE id = ?");
const preparedTouch = db
  .update(nodes)
  .set({ lastSeen: sql.placeholder("at") as never })
  .where(eq(nodes.id, sql.placeholder("id")))
  .prepare();
const N = Number(process.env.BENCH_OPS ?? 200_000);
function time(name: string, f: (i: number) => void) {
  for (let i = 0; i < 20_000; i++) f(i);
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f(i);
  const ns = Number(process.hrtime.bigint() - t) / N;
  process.stdout.write(`${name}: ${(ns / 1000).toFixed(2)} µs/op\n`);
}
for (let round = 0; round < 2; round++) {
  time("read raw        ", (i) => raw.get(ids[i % 1000] as string));
  time("read drizzle prp", (i) => prepared.get({ id: ids[i % 1000] }));
  time("read drizzle    ", async (i) =>
    firstRow(
      await db
        .select({ projectId: nodes.projectId })
        .from(nodes)
        .where(eq(nodes.id, ids[i % 1000] as string)),
    ),
  );
  const at = new Date().toISOString();
  time("touch raw        ", (i) => rawTouch.run(at, ids[i % 1000] as string));
  time("touch drizzle prp", (i) => preparedTouch.run({ at, id: ids[i % 1000] }));
}

async function timeAsync(name: string, f: (i: number) => Promise<unknown>, n = N / 10) {
  for (let i = 0; i < 2_000; i++) await f(i);
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await f(i);
  const ns = Number(process.hrtime.bigint() - t) / n;
  process.stdout.write(`${name}: ${(ns / 1000).toFixed(2)} µs/op\n`);
}

async function seedStore(db: Db): Promise<void> {
  await db.insert(projects).values({ id: projectId, name: "p" });
  await db.insert(cloudProviders).values({ id: "cp", projectId, name: "local", type: "local" });
  await db.insert(nodePools).values({ id: "np", projectId, cloudProviderId: "cp", name: "local" });
  const rows = ids.map((id, i) => ({ id, projectId, name: `n${i}`, nodePoolId: "np" }));
  for (let i = 0; i < rows.length; i += 200) await db.insert(nodes).values(rows.slice(i, i + 200) as never);
}

async function benchStore(label: string, store: Store): Promise<void> {
  const read = (i: number, db: Tx = store.db) =>
    db
      .select({ projectId: nodes.projectId })
      .from(nodes)
      .where(eq(nodes.id, ids[i % 1000] as string));
  await timeAsync(`${label} read drizzle    `, async (i) => firstRow(await read(i)));
  await timeAsync(`${label} read in a tx    `, (i) => store.db.transaction(async (tx) => firstRow(await read(i, tx))));
}

const server = await startPostgres();
try {
  const sqliteStore = await openStore({ dialect: "sqlite", file: ":memory:", binaryVersion: "0.1.0" });
  const pgUrl = await server.createDatabase();
  const pgStore = await openStore({
    dialect: "postgres",
    target: parseDatabaseUrl(pgUrl),
    poolSize: 4,
    statementTimeoutMs: 30_000,
    connectTimeoutMs: 5_000,
    startTimeoutMs: 0,
    applicationName: "keelson-bench",
    binaryVersion: "0.1.0",
  });
  await seedStore(sqliteStore.db);
  await seedStore(pgStore.db);
  for (let round = 0; round < 2; round++) {
    await benchStore("sqlite store", sqliteStore);
    await benchStore("postgres    ", pgStore);
  }
  await sqliteStore.close();
  await pgStore.close();
} finally {
  await server.stop();
}
