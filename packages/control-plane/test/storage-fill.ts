import { type SQL, sql } from "drizzle-orm";
import type { TestApp } from "./helpers.ts";

/**
 * The store's storage full, made real on each dialect: SQLite with a page ceiling
 * (`max_page_count`), so writes that need a new page fail with SQLITE_FULL as on a full disk;
 * PostgreSQL with a trigger that raises `disk_full` (SQLSTATE 53100), as the server does when
 * it cannot extend a file, on inserts and updates of the tables named. Each goes through the
 * real driver and drizzle. (test/e2e/disk-full.test.ts fills a real disk.)
 */
export async function fillStore(t: TestApp, tables: string[]): Promise<void> {
  if (t.store.dialect === "sqlite") {
    const [pages] = await t.db.get<[number]>(sql`pragma page_count`);
    await t.db.run(sql.raw(`pragma max_page_count = ${pages + 2}`));
    return;
  }
  await pg(t)(
    sql.raw(`create or replace function keelson_test_disk_full() returns trigger language plpgsql as $$
      begin raise exception 'could not extend file "base/1/2": No space left on device' using errcode = 'disk_full'; end $$`),
  );
  for (const table of tables) {
    await pg(t)(
      sql.raw(`create trigger disk_full before insert or update on ${table} execute function keelson_test_disk_full()`),
    );
  }
}

export async function freeStore(t: TestApp, tables: string[]): Promise<void> {
  if (t.store.dialect === "sqlite") {
    await t.db.run(sql.raw("pragma max_page_count = 1073741823"));
    return;
  }
  for (const table of tables) await pg(t)(sql.raw(`drop trigger if exists disk_full on ${table}`));
}

function pg(t: TestApp): (q: SQL) => Promise<unknown> {
  const db = t.db as unknown as { execute(q: SQL): Promise<unknown> };
  return (q) => db.execute(q);
}

/**
 * A store that refuses every insert into `table` (a trigger raising an error, on either
 * dialect): a store error at one chosen write, through the real driver, while the rest of the
 * store works. `allowInserts` drops it.
 */
export async function refuseInserts(t: TestApp, table: string): Promise<void> {
  if (t.store.dialect === "sqlite") {
    await t.db.run(
      sql.raw(
        `create trigger refuse_${table} before insert on ${table} begin select raise(abort, 'the store refused the write'); end`,
      ),
    );
    return;
  }
  await pg(t)(
    sql.raw(`create or replace function keelson_test_refuse() returns trigger language plpgsql as $$
      begin raise exception 'the store refused the write'; end $$`),
  );
  await pg(t)(
    sql.raw(`create trigger refuse_${table} before insert on ${table} execute function keelson_test_refuse()`),
  );
}

export async function allowInserts(t: TestApp, table: string): Promise<void> {
  await (t.store.dialect === "sqlite" ? (q: SQL) => t.db.run(q) : pg(t))(
    sql.raw(`drop trigger if exists refuse_${table}${t.store.dialect === "sqlite" ? "" : ` on ${table}`}`),
  );
}
