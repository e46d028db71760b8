import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import { openSqliteConnection } from "../src/client.ts";
import { cloudProviders, clusters, joinTokens, nodePools, nodes, operations, projects } from "../src/schema.ts";
import {
  type CopyProgress,
  copySqliteToPostgres,
  MIGRATIONS,
  openPostgresStore,
  openStore,
  parseDatabaseUrl,
} from "../src/store/index.ts";

const dir = mkdtempSync(join(tmpdir(), "keelson-copy-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A control plane's database with 1,000 clusters, 3,000 nodes and 2,000 operations. */
async function seed(file: string): Promise<void> {
  const store = await openStore({ dialect: "sqlite", file, binaryVersion: "0.1.0" });
  const { db } = store;
  await db.insert(projects).values({ id: "p", name: "default" });
  await db.insert(cloudProviders).values({ id: "cp", projectId: "p", name: "local", type: "local" });
  await db.insert(nodePools).values({ id: "np", projectId: "p", cloudProviderId: "cp", name: "local" });
  await db.transaction(async (tx) => {
    for (let i = 0; i < 1000; i++) {
      const id = randomUUID();
      // Keys out of alphabetical order: the copy must keep them where they are.
      const spec = { name: `c${i}`, zeta: i, networkPlugin: "calico", alpha: ["b", "a"], tags: { z: "1", a: "ü ✓" } };
      await tx.insert(clusters).values({
        id,
        projectId: "p",
        name: `c${i}`,
        nodePoolId: "np",
        cloudProviderId: "cp",
        kubeRoleVersion: "1.31.4-kls.1",
        spec: spec as never,
        caCertPem: "pem",
        caKeyEnc: "enc",
      });
      for (let n = 0; n < 3; n++) {
        await tx.insert(nodes).values({
          id: randomUUID(),
          projectId: "p",
          nodePoolId: "np",
          clusterId: id,
          name: `c${i}-n${n}`,
          isMaster: n === 0 ? 1 : 0,
          facts: { os: "debian", cpus: 2, memory: { total: 8 } },
          phases: [{ name: "etcd", state: "running" }],
        });
      }
      // A cluster's own join token (auto deploy): its row needs the cluster's first.
      if (i % 100 === 0) {
        await tx.insert(joinTokens).values({
          id: randomUUID(),
          projectId: "p",
          tokenHash: `hash-${i}`,
          expiresAt: "2030-01-01T00:00:00.000Z",
          clusterId: id,
        });
      }
      for (let o = 0; o < 2; o++) {
        await tx.insert(operations).values({
          id: randomUUID(),
          projectId: "p",
          kind: "cluster.create",
          targetType: "cluster",
          targetId: id,
          params: { o, b: 1, a: 2 },
          cursor: { step: 3 },
        });
      }
    }
  });
  await store.close();
}

describe("copying a SQLite database into PostgreSQL", () => {
  it("copies every row value for value, checks each table, and refuses to copy into a non-empty database", async () => {
    const file = join(dir, "keelson.sqlite");
    await seed(file);
    const store = await openPostgresStore({
      target: parseDatabaseUrl(await freshDatabaseUrl()),
      poolSize: 2,
      statementTimeoutMs: 60_000,
      connectTimeoutMs: 5_000,
      startTimeoutMs: 0,
      applicationName: "keelson-copy-test",
      migrationsFolder: MIGRATIONS.postgres,
    });
    const source = openSqliteConnection(file);
    try {
      const progress: CopyProgress[] = [];
      const copied = await copySqliteToPostgres(source, store.client, (p) => progress.push(p));
      const byTable = Object.fromEntries(copied.map((t) => [t.table, t]));
      expect(byTable.clusters).toMatchObject({ rows: 1000, copiedRows: 1000 });
      expect(byTable.nodes).toMatchObject({ rows: 3000, copiedRows: 3000 });
      expect(byTable.operations).toMatchObject({ rows: 2000, copiedRows: 2000 });
      expect(byTable.join_tokens).toMatchObject({ rows: 10, copiedRows: 10 });
      for (const table of copied) {
        expect(table.copiedRows, table.table).toBe(table.rows);
        expect(table.targetChecksum, table.table).toBe(table.sourceChecksum);
      }
      expect(progress.filter((p) => p.table === "nodes").map((p) => p.copied)).toEqual([
        0, 500, 1000, 1500, 2000, 2500, 3000,
      ]);
      // The same bytes: a JSON document is the same text on both sides.
      const sqliteSpec = source.prepare("select id, spec from clusters order by id limit 1").get() as {
        id: string;
        spec: string;
      };
      const [pgSpec] = await store.client`select spec from clusters where id = ${sqliteSpec.id}`;
      expect(pgSpec?.spec).toBe(sqliteSpec.spec);
      expect(sqliteSpec.spec).toMatch(
        /^\{"name":"c\d+","zeta":\d+,"networkPlugin":"calico","alpha":\["b","a"\],"tags":\{"z":"1","a":"ü ✓"\}\}$/,
      );

      await expect(copySqliteToPostgres(source, store.client)).rejects.toThrow(
        "the target database is not empty: projects has 1 rows",
      );
    } finally {
      source.close();
      await store.close();
    }
  });
});
