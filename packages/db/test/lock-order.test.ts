import { and, eq, inArray, type SQL, sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import { cloudProviders, nodePools, nodes, projects } from "../src/schema.ts";
import { inJsonArray, lockedInIdOrder, lockIds, lockRows, openStore, rowsOf, type Store } from "../src/store/index.ts";
import { optionsFor } from "./store-options.ts";

/**
 * Two writers of the same rows of one table on PostgreSQL: one locks them with lockRows (an
 * attach), the other writes several in one UPDATE joined to a batch of rows (rowsOf, as the
 * node reports do). The UPDATE takes its locks in the join's order; without lockIds first, the
 * two deadlock within a few hundred rounds here and PostgreSQL aborts one (40P01).
 */
const HOSTS = 24;
const ROUNDS = 150;

let store: Store;
const ids = Array.from({ length: HOSTS }, (_, i) => `h${String(i).padStart(2, "0")}`);

let url: string;

beforeAll(async () => {
  url = await freshDatabaseUrl();
  store = await openStore(await optionsFor("postgres", url));
  const { db } = store;
  await db.insert(projects).values({ id: "p", name: "p" });
  await db.insert(cloudProviders).values({ id: "cp", projectId: "p", name: "n", type: "local" });
  await db.insert(nodePools).values({ id: "np", projectId: "p", cloudProviderId: "cp", name: "n" });
  await db.insert(nodes).values(ids.map((id) => ({ id, projectId: "p", nodePoolId: "np", name: id })));
});
afterAll(() => store?.close());

/** The ids in a random order: the order a batch of reports arrives in. */
function shuffled(): string[] {
  const out = [...ids];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as string, out[i] as string];
  }
  return out;
}

type BatchWrite = (order: string[], rows: SQL) => Promise<unknown>;

/** Two batch writers (`write`) and two lockRows writers over the same rows, ROUNDS each: no error. */
async function sideBySide(write: BatchWrite): Promise<void> {
  const { db } = store;
  const errors: unknown[] = [];
  let batches = 0;
  let locks = 0;
  const batchWriter = async () => {
    // Stops at the first error: each deadlock costs PostgreSQL's deadlock_timeout (1 s).
    for (let round = 0; round < ROUNDS && errors.length === 0; round++) {
      const order = shuffled();
      const rows = rowsOf(
        order.map((h) => ({ h, s: `r${round}` })),
        {
          r_host: { key: "h", type: "text" },
          r_status: { key: "s", type: "text" },
        },
      );
      try {
        await write(order, rows);
        batches++;
      } catch (err) {
        errors.push(err);
      }
    }
  };
  const locker = async () => {
    // Stops at the first error: each deadlock costs PostgreSQL's deadlock_timeout (1 s).
    for (let round = 0; round < ROUNDS && errors.length === 0; round++) {
      const some = shuffled().slice(0, HOSTS / 2);
      try {
        await db.transaction(async (tx) => {
          const locked = await lockRows(tx, nodes, inArray(nodes.id, some));
          expect(locked.map((n) => n.id)).toEqual([...some].sort());
          await tx
            .update(nodes)
            .set({ isMaster: 1 })
            .where(and(inArray(nodes.id, some), eq(nodes.projectId, "p")));
        });
        locks++;
      } catch (err) {
        errors.push(err);
      }
    }
  };
  await Promise.all([batchWriter(), batchWriter(), locker(), locker()]);
  expect(errors.map((e) => String((e as { cause?: { code?: string } }).cause?.code ?? e))).toEqual([]);
  expect({ batches, locks }).toEqual({ batches: 2 * ROUNDS, locks: 2 * ROUNDS });
}

describe("lockIds on PostgreSQL", () => {
  it("lets a batch UPDATE and a lockRows of the same rows run side by side without a deadlock", async () => {
    await sideBySide((order, rows) =>
      store.db.transaction(async (tx) => {
        await lockIds(tx, nodes, order);
        await tx
          .update(nodes)
          .set({ status: sql`r_status` })
          .from(sql`${rows} as r`)
          .where(eq(nodes.id, sql`r.r_host`));
      }),
    );
  });

  it("lockedInIdOrder: the same with the locks taken by the UPDATE itself, through a join (no transaction)", async () => {
    await sideBySide((order, rows) =>
      store.db
        .update(nodes)
        .set({ status: sql`r_status` })
        .from(
          sql`(select r.* from ${rows} as r join ${lockedInIdOrder(nodes, order)} as l on l.locked_id = r.r_host) as r`,
        )
        .where(eq(nodes.id, sql`r.r_host`)),
    );
  });
});

describe("inJsonArray on PostgreSQL", () => {
  it("finds the rows it names through the primary key, never by reading the whole table", async () => {
    const { db } = store;
    const many = Array.from({ length: 2000 }, (_, i) => ({
      id: `bulk-${i}`,
      projectId: "p",
      nodePoolId: "np",
      name: `bulk-${i}`,
    }));
    await db.insert(nodes).values(many);
    try {
      const client = postgres(url, { max: 1, onnotice: () => {} });
      const dialect = new PgDialect();
      try {
        await client`analyze nodes`;
        const named = many.slice(0, 35).map((n) => n.id);
        const plans = [
          sql`explain select id from nodes where ${inJsonArray("postgres", nodes.id, named)}`,
          sql`explain select * from ${lockedInIdOrder(nodes, named)} l`,
        ];
        for (const plan of plans) {
          const query = dialect.sqlToQuery(plan);
          const rows = await client.unsafe(query.sql, query.params as string[]);
          const text = rows.map((row) => Object.values(row)[0]).join("\n");
          expect(text).toContain("nodes_pkey");
          expect(text).not.toMatch(/Seq Scan on nodes/);
        }
      } finally {
        await client.end({ timeout: 1 });
      }
    } finally {
      await db.delete(nodes).where(
        inArray(
          nodes.id,
          many.map((n) => n.id),
        ),
      );
    }
  });
});
