import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { drizzle as sqliteDrizzle } from "drizzle-orm/better-sqlite3";
import { migrate as sqliteMigrate } from "drizzle-orm/better-sqlite3/migrator";
import { drizzle as pgDrizzle } from "drizzle-orm/postgres-js";
import { migrate as pgMigrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { afterEach, describe, expect, it } from "vitest";
import { freshDatabaseUrl } from "../../../test/support/postgres-database.ts";
import { tokens, users } from "../src/schema.ts";
import { MIGRATIONS, openStore, parseDatabaseUrl, type Store } from "../src/store/index.ts";

/**
 * The project-roles migration (issue 16): users and project tokens made before it keep the
 * access they had (admin); rows made after it without a role get the least that still works.
 */

const scratch: string[] = [];
const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A copy of a dialect's migrations that stops before the roles migration. */
function migrationsBeforeRoles(folder: string): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-migrations-"));
  scratch.push(dir);
  cpSync(folder, dir, { recursive: true });
  const journalFile = join(dir, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalFile, "utf8")) as { entries: { tag: string }[] };
  const at = journal.entries.findIndex((e) => e.tag.endsWith("_project_roles"));
  expect(at).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalFile, JSON.stringify(journal));
  return dir;
}

const SEED = [
  `INSERT INTO projects (id, name) VALUES ('p1', 'old')`,
  `INSERT INTO users (id, project_id, name, password_hash) VALUES ('u1', 'p1', 'alice', 'x')`,
  `INSERT INTO tokens (id, project_id, kind, name, token_hash) VALUES ('t1', 'p1', 'project', 'ci', 'h1')`,
  `INSERT INTO tokens (id, project_id, user_id, kind, name, token_hash) VALUES ('t2', 'p1', 'u1', 'session', 'login', 'h2')`,
];

async function expectRolesAfterUpgrade(store: Store): Promise<void> {
  stores.push(store);
  const db = store.db;
  expect(await db.select({ id: users.id, role: users.role }).from(users)).toEqual([{ id: "u1", role: "admin" }]);
  const tokenRoles = await db.select({ id: tokens.id, role: tokens.role }).from(tokens);
  expect(tokenRoles.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
    { id: "t1", role: "admin" },
    { id: "t2", role: "admin" },
  ]);
  // A row written without a role (an older writer, a forgotten column) gets member, never admin.
  await db.insert(users).values({ id: "u2", projectId: "p1", name: "bob", passwordHash: "x" });
  await db.insert(tokens).values({ id: "t3", projectId: "p1", kind: "project", tokenHash: "h3" });
  expect((await db.select({ role: users.role }).from(users)).map((r) => r.role).sort()).toEqual(["admin", "member"]);
  expect((await db.select({ role: tokens.role }).from(tokens)).map((r) => r.role).sort()).toEqual([
    "admin",
    "admin",
    "member",
  ]);
}

describe("the project-roles migration", () => {
  it("makes every user and token of an existing SQLite database admin", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-roles-"));
    scratch.push(dir);
    const file = join(dir, "keelson.sqlite");
    const sqlite = new Database(file);
    sqliteMigrate(sqliteDrizzle(sqlite), { migrationsFolder: migrationsBeforeRoles(MIGRATIONS.sqlite) });
    for (const statement of SEED) sqlite.exec(statement);
    sqlite.close();
    await expectRolesAfterUpgrade(await openStore({ dialect: "sqlite", file, binaryVersion: "0.1.0" }));
  });

  it("makes every user and token of an existing PostgreSQL database admin", async () => {
    const url = await freshDatabaseUrl();
    const client = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await pgMigrate(pgDrizzle(client), { migrationsFolder: migrationsBeforeRoles(MIGRATIONS.postgres) });
      for (const statement of SEED) await client.unsafe(statement);
    } finally {
      await client.end();
    }
    await expectRolesAfterUpgrade(
      await openStore({
        dialect: "postgres",
        target: parseDatabaseUrl(url),
        poolSize: 2,
        statementTimeoutMs: 10_000,
        connectTimeoutMs: 5_000,
        startTimeoutMs: 0,
        applicationName: "keelson-test",
        binaryVersion: "0.1.0",
      }),
    );
  });
});
