import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asc, count, eq } from "drizzle-orm";
import postgres from "postgres";
import { afterEach, describe, expect, it } from "vitest";
import { freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import { cloudProviders, clusters, keelsonSchema, nodePools, nodes, operations, projects } from "../src/schema.ts";
import {
  DatabaseUnavailableError,
  firstRow,
  MIGRATIONS,
  openStore,
  SchemaTooNewError,
  type Store,
  type StoreOptions,
} from "../src/store/index.ts";
import { openPostgresStore } from "../src/store/postgres-store.ts";
import { optionsFor } from "./store-options.ts";

const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function open(dialect: Store["dialect"], url?: string): Promise<Store> {
  const store = await openStore(await optionsFor(dialect, url));
  stores.push(store);
  return store;
}

/** Text that compresses poorly, as a host's facts mostly do (ids, keys, addresses). */
const randomBytesText = (length: number) => randomBytes(length).toString("base64").slice(0, length);

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe.each(["sqlite", "postgres"] as const)("the %s store", (dialect) => {
  it("runs the same awaited queries with the same results", async () => {
    const { db } = await open(dialect);
    const inserted = await db.insert(projects).values({ id: "p1", name: "one" }).returning();
    expect(inserted).toEqual([{ id: "p1", name: "one", createdAt: expect.stringMatching(ISO) }]);
    await db.insert(projects).values({ id: "p2", name: "two" });
    const upserted = await db
      .insert(projects)
      .values({ id: "p1", name: "one" })
      .onConflictDoUpdate({ target: projects.id, set: { name: "uno" } })
      .returning({ name: projects.name });
    expect(upserted).toEqual([{ name: "uno" }]);
    expect(await db.select({ id: projects.id }).from(projects).orderBy(asc(projects.name))).toEqual([
      { id: "p2" },
      { id: "p1" },
    ]);
    expect(firstRow(await db.select().from(projects).where(eq(projects.id, "nope")))).toBeUndefined();
    const [{ n } = { n: -1 }] = await db.select({ n: count() }).from(projects);
    expect(n).toBe(2);
    const removed = await db.delete(projects).where(eq(projects.id, "p2")).returning({ id: projects.id });
    expect(removed).toEqual([{ id: "p2" }]);
  });

  it("returns JSON documents as stored, keys in their order", async () => {
    const { db } = await open(dialect);
    await db.insert(projects).values({ id: "p", name: "p" });
    const params = { zeta: 1, alpha: { y: [3, 1], b: null }, mid: "x" };
    await db.insert(operations).values({
      id: "o",
      projectId: "p",
      kind: "k",
      targetType: "cluster",
      targetId: "c",
      params,
      cursor: { step: 2 },
    });
    const row = firstRow(await db.select().from(operations).where(eq(operations.id, "o")));
    expect(JSON.stringify(row?.params)).toBe(JSON.stringify(params));
    expect(row).toMatchObject({ state: "pending", attempts: 0, error: null, createdAt: expect.stringMatching(ISO) });
  });

  it("rolls a failed transaction back whole", async () => {
    const { db } = await open(dialect);
    await expect(
      db.transaction(async (tx) => {
        await tx.insert(projects).values({ id: "a", name: "a" });
        await tx.insert(projects).values({ id: "b", name: "a" }); // duplicate name
      }),
    ).rejects.toThrow();
    expect(await db.select().from(projects)).toEqual([]);
  });

  it("keeps foreign keys and their cascades", async () => {
    const { db } = await open(dialect);
    await expect(
      db.insert(cloudProviders).values({ id: "cp", projectId: "missing", name: "n", type: "local" }),
    ).rejects.toThrow();
    await db.insert(projects).values({ id: "p", name: "p" });
    await db.insert(cloudProviders).values({ id: "cp", projectId: "p", name: "n", type: "local" });
    await db.insert(nodePools).values({ id: "np", projectId: "p", cloudProviderId: "cp", name: "n" });
    await db.insert(clusters).values({
      id: "c",
      projectId: "p",
      name: "c",
      nodePoolId: "np",
      cloudProviderId: "cp",
      kubeRoleVersion: "1",
      spec: {} as never,
      caCertPem: "",
      caKeyEnc: "",
    });
    expect((await db.select().from(clusters)).map((c) => c.id)).toEqual(["c"]);
    // A project's delete takes its clusters, pools and providers along.
    await db.delete(projects).where(eq(projects.id, "p"));
    expect(await db.select().from(clusters)).toEqual([]);
    expect(await db.select().from(nodePools)).toEqual([]);
  });
});

describe.each(["sqlite", "postgres"] as const)("the %s schema's binary requirement", (dialect) => {
  it("refuses a binary older than the schema asks for, naming both versions; a newer one runs", async () => {
    const options = await optionsFor(dialect === "sqlite" ? "sqlite" : "postgres");
    const sqliteFile = join(mkdtempSync(join(tmpdir(), "keelson-compat-")), "keelson.sqlite");
    const at = (binaryVersion: string) =>
      openStore({
        ...options,
        ...(options.dialect === "sqlite" ? { file: sqliteFile } : {}),
        binaryVersion,
      } as StoreOptions);
    const initial = await at("0.1.0");
    await initial.db.update(keelsonSchema).set({ minBinaryVersion: "0.3.0" });
    await initial.close();
    const refused = await at("0.2.9").catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(SchemaTooNewError);
    expect((refused as Error).message).toBe(
      "this database needs keelson-server 0.3.0 or newer, and this one is 0.2.9: start a newer keelson-server (or restore the backup taken before the upgrade)",
    );
    const newer = await at("0.10.0");
    stores.push(newer);
    expect(firstRow(await newer.db.select().from(keelsonSchema))?.minBinaryVersion).toBe("0.3.0");
  });
});

describe("the SQLite store's gate", () => {
  it("keeps other statements out of an open transaction, and out of its rollback", async () => {
    const { db } = await open("sqlite");
    let insideDone!: () => void;
    const holding = new Promise<void>((resolve) => {
      insideDone = resolve;
    });
    const events: string[] = [];
    const transaction = db
      .transaction(async (tx) => {
        await tx.insert(projects).values({ id: "inside", name: "inside" });
        events.push("tx wrote");
        await holding;
        throw new Error("roll back");
      })
      .catch((err: Error) => events.push(`tx ${err.message}`));
    // Let the transaction reach its BEGIN and first write.
    await new Promise((resolve) => setTimeout(resolve, 10));
    const outsideWrite = db
      .insert(projects)
      .values({ id: "outside", name: "outside" })
      .then(() => events.push("outside wrote"));
    const outsideRead = db
      .select()
      .from(projects)
      .then((rows) => events.push(`outside read ${rows.map((r) => r.id).join(",")}`));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(["tx wrote"]);
    insideDone();
    await Promise.all([transaction, outsideWrite, outsideRead]);
    // The outside statements ran after the rollback, in order, and the rollback did not take them along.
    expect(events).toEqual(["tx wrote", "tx roll back", "outside wrote", "outside read outside"]);
    expect((await db.select().from(projects)).map((r) => r.id)).toEqual(["outside"]);
  });

  it("runs concurrent read-modify-write transactions one after another", async () => {
    const { db } = await open("sqlite");
    await db.insert(projects).values({ id: "p", name: "0" });
    await Promise.all(
      Array.from({ length: 20 }, () =>
        db.transaction(async (tx) => {
          const row = firstRow(await tx.select().from(projects).where(eq(projects.id, "p")));
          await new Promise((resolve) => setImmediate(resolve));
          await tx
            .update(projects)
            .set({ name: String(Number(row?.name) + 1) })
            .where(eq(projects.id, "p"));
        }),
      ),
    );
    expect(firstRow(await db.select().from(projects))?.name).toBe("20");
  });
});

describe("the PostgreSQL store", () => {
  it("compresses the large JSON columns with lz4 where the server has it (this one does)", async () => {
    const url = await freshDatabaseUrl();
    const { db } = await open("postgres", url);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ table: string; column: string; compression: string }[]>`
        select c.relname as table, a.attname as column, a.attcompression as compression
        from pg_attribute a join pg_class c on c.oid = a.attrelid
        where (c.relname, a.attname) in (('nodes', 'phases'), ('nodes', 'facts'), ('operations', 'cursor'),
          ('operations', 'params'), ('agent_commands', 'payload'), ('agent_commands', 'result'), ('events', 'payload'))
        order by 1, 2`;
      expect(rows.map((r) => `${r.table}.${r.column}=${r.compression}`)).toEqual([
        "agent_commands.payload=l",
        "agent_commands.result=l",
        "events.payload=l",
        "nodes.facts=l",
        "nodes.phases=l",
        "operations.cursor=l",
        "operations.params=l",
      ]);
      // A value large enough to be compressed is, with lz4, and reads back whole.
      await db.insert(projects).values({ id: "p", name: "x".repeat(100) });
      const big = Array.from({ length: 400 }, (_, i) => ({ phase: i, state: "running" }));
      await db
        .insert(operations)
        .values({ id: "o", projectId: "p", kind: "k", targetType: "cluster", targetId: "t", params: { big } });
      const [stored] = await sql<{ method: string }[]>`select pg_column_compression(params) as method from operations`;
      expect(stored?.method).toBe("lz4");
      expect(firstRow(await db.select().from(operations))?.params).toEqual({ big });
    } finally {
      await sql.end();
    }
  });

  it("keeps room in the nodes table's pages: a report's rewrite of a node row stays on its page (no index entries)", async () => {
    const url = await freshDatabaseUrl();
    const { db } = await open("postgres", url);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [table] = await sql<
        { options: string[] | null }[]
      >`select reloptions as options from pg_class where relname = 'nodes'`;
      expect(table?.options).toEqual(["fillfactor=60"]);
      await db.insert(projects).values({ id: "p", name: "p" });
      await db.insert(cloudProviders).values({ id: "cp", projectId: "p", name: "n", type: "local" });
      await db.insert(nodePools).values({ id: "np", projectId: "p", cloudProviderId: "cp", name: "n" });
      // Rows the size of a rollout's (a phase list and the host's facts, about 1.5 KB stored).
      const phases = (at: number) =>
        Array.from({ length: 20 }, (_, i) => ({
          id: `phase-${i}`,
          state: "running",
          startedAt: new Date(at + i).toISOString(),
        }));
      const facts = { os: "Debian GNU/Linux 12", cpus: 2, note: randomBytesText(900) };
      await db.insert(nodes).values(
        Array.from({ length: 20 }, (_, i) => ({
          id: `n${i}`,
          projectId: "p",
          nodePoolId: "np",
          name: `n${i}`,
          facts,
          phases: phases(i),
        })),
      );
      const pageOf = async () =>
        (
          await sql<
            { id: string; page: string }[]
          >`select id, (ctid::text::point)[0]::text as page from nodes order by id`
        ).map((r) => `${r.id}@${r.page}`);
      const before = await pageOf();
      for (let round = 1; round <= 2; round++)
        for (let i = 0; i < 20; i++)
          await db
            .update(nodes)
            .set({ status: "converging", phases: phases(round * 1000 + i) })
            .where(eq(nodes.id, `n${i}`));
      expect(await pageOf()).toEqual(before);
    } finally {
      await sql.end();
    }
  });

  it("migrates once when two servers start on the same empty database at once", async () => {
    const url = await freshDatabaseUrl();
    await Promise.all([open("postgres", url), open("postgres", url)]);
    const journal = JSON.parse(readFileSync(join(MIGRATIONS.postgres, "meta", "_journal.json"), "utf8"));
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql`select hash from drizzle.__drizzle_migrations`;
      expect(rows.length).toBe(journal.entries.length);
      const [{ name } = { name: "" }] = await sql`select application_name as name from pg_stat_activity
        where datname = current_database() and application_name = 'keelson-test' limit 1`;
      expect(name).toBe("keelson-test");
    } finally {
      await sql.end();
    }
  });

  it("refuses a wrong password with the server's answer and never shows the password", async () => {
    const url = new URL(await freshDatabaseUrl());
    url.password = "not-the-Password-42";
    const failure = await openStore(await optionsFor("postgres", url.toString())).catch(
      (err: Error & { code?: string }) => err,
    );
    expect(failure).toBeInstanceOf(DatabaseUnavailableError);
    const error = failure as DatabaseUnavailableError;
    expect(error.code).toBe("28P01");
    expect(error.message).toMatch(
      /^PostgreSQL at keelson@127\.0\.0\.1:\d+\/t_[0-9a-f]{12}: password authentication failed/,
    );
    expect(error.message).not.toContain("not-the-Password-42");
  });

  it("retries an unreachable database until its start timeout, then names where and why", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const retries: number[] = [];
    const started = Date.now();
    const options = await optionsFor("postgres", `postgres://keelson:pw@127.0.0.1:${port}/keelson`);
    const failure = await openStore({
      ...options,
      startTimeoutMs: 1_500,
      onRetry: (_err, delayMs) => retries.push(delayMs),
    } as StoreOptions).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(DatabaseUnavailableError);
    expect((failure as Error).message).toContain(`PostgreSQL at keelson@127.0.0.1:${port}/keelson`);
    expect((failure as DatabaseUnavailableError).code).toBe("ECONNREFUSED");
    expect(retries).toEqual([250, 500]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("fails at once on a migration PostgreSQL refuses, with its answer, instead of retrying it", async () => {
    const folder = mkdtempSync(join(tmpdir(), "keelson-migrations-"));
    try {
      cpSync(MIGRATIONS.postgres, folder, { recursive: true });
      const journalFile = join(folder, "meta", "_journal.json");
      const journal = JSON.parse(readFileSync(journalFile, "utf8"));
      const last = journal.entries.at(-1);
      journal.entries.push({ ...last, idx: last.idx + 1, when: last.when + 1000, tag: "9999_broken" });
      writeFileSync(journalFile, JSON.stringify(journal));
      writeFileSync(join(folder, "9999_broken.sql"), 'CREATE TABLE "half" (;');
      const options = await optionsFor("postgres");
      const retries: number[] = [];
      const started = Date.now();
      const failure = await openPostgresStore({
        ...(options as Extract<StoreOptions, { dialect: "postgres" }>),
        startTimeoutMs: 10_000,
        migrationsFolder: folder,
        onRetry: (_err, delayMs) => retries.push(delayMs),
      }).catch((err: Error & { cause?: { code?: string } }) => err);
      expect(failure).not.toBeInstanceOf(DatabaseUnavailableError);
      expect((failure as Error).message).toContain('CREATE TABLE "half" (;');
      expect((failure as { cause?: { code?: string } }).cause?.code).toBe("42601");
      expect(retries).toEqual([]);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("refuses TLS it was told to require from a server without it, and connects with sslmode=disable", async () => {
    const url = new URL(await freshDatabaseUrl());
    url.searchParams.set("sslmode", "require");
    const refused = await openStore(await optionsFor("postgres", url.toString())).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(DatabaseUnavailableError);
    expect((refused as Error).message).toMatch(/ssl|tls/i);
    url.searchParams.set("sslmode", "disable");
    const store = await open("postgres", url.toString());
    await expect(store.ping()).resolves.toBeUndefined();
  });
});
