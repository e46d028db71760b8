/**
 * `pnpm bench store`: the cost of a drizzle query against the raw better-sqlite3 statement
 * it compiles to (the baseline, same run), for the hot single-row reads and writes of the
 * agent link (a node's project, presence). Decides where raw SQL through `$client` is worth it.
 */
import { randomUUID } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { createTestDatabase, nodes, projects } from "../../../packages/db/src/index.ts";

const db = createTestDatabase();
// Rows stand alone here: only the statements are measured.
db.$client.pragma("foreign_keys = OFF");
const projectId = randomUUID();
db.insert(projects).values({ id: projectId, name: "p" }).run();
const ids: string[] = [];
for (let i = 0; i < 1000; i++) {
  const id = randomUUID();
  ids.push(id);
  db.insert(nodes)
    .values({ id, projectId, name: `n${i}`, credentialHash: randomUUID(), nodePoolId: randomUUID() } as never)
    .run();
}
const raw = db.$client.prepare<[string], { project_id: string }>("SELECT project_id FROM nodes WHERE id = ?");
const prepared = db
  .select({ projectId: nodes.projectId })
  .from(nodes)
  .where(eq(nodes.id, sql.placeholder("id")))
  .prepare();
const rawTouch = db.$client.prepare("UPDATE nodes SET last_seen = ? WHERE id = ?");
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
  time("read drizzle    ", (i) =>
    db
      .select({ projectId: nodes.projectId })
      .from(nodes)
      .where(eq(nodes.id, ids[i % 1000] as string))
      .get(),
  );
  const at = new Date().toISOString();
  time("touch raw        ", (i) => rawTouch.run(at, ids[i % 1000] as string));
  time("touch drizzle prp", (i) => preparedTouch.run({ at, id: ids[i % 1000] }));
}
