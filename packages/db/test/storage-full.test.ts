import { DrizzleQueryError } from "drizzle-orm";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { createTestStore, DataDirFullError, databaseUnavailable, storageFull } from "../src/index.ts";

const noSpace = (): NodeJS.ErrnoException =>
  Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28, syscall: "write" });

describe("storageFull", () => {
  it("recognises SQLite's SQLITE_FULL as drizzle raises it, and it is also something to wait out", async () => {
    const store = createTestStore();
    try {
      const { sql } = await import("drizzle-orm");
      await store.db.run(sql`create table big (v text)`);
      const [pages] = await store.db.get<[number]>(sql`pragma page_count`);
      await store.db.run(sql.raw(`pragma max_page_count = ${pages + 1}`));
      const err = await store.db.run(sql`insert into big values (${"x".repeat(100_000)})`).catch((e: unknown) => e);
      expect(storageFull(err)).toMatchObject({ where: "data-dir", reason: expect.stringContaining("SQLITE_FULL") });
      expect(databaseUnavailable(err)).toBe(storageFull(err)?.reason);
    } finally {
      await store.close();
    }
  });

  it("recognises PostgreSQL's disk_full (53100) as the database's disk", () => {
    const pgError = Object.assign(Object.create(postgres.PostgresError.prototype), {
      name: "PostgresError",
      message: 'could not extend file "base/1/2": No space left on device',
      code: "53100",
      severity: "ERROR",
    });
    const wrapped = new DrizzleQueryError("insert into clusters …", [], pgError);
    expect(storageFull(wrapped)).toMatchObject({ where: "database", reason: expect.stringContaining("53100") });
    // Other class-53 answers (too many connections) stay "the database is away".
    const tooMany = new DrizzleQueryError(
      "select 1",
      [],
      Object.assign(new Error("too many clients"), { code: "53300" }),
    );
    expect(storageFull(tooMany)).toBeUndefined();
    expect(databaseUnavailable(tooMany)).toContain("53300");
  });

  it("takes ENOSPC only from a data-dir write (DataDirFullError), never a bare one from elsewhere", () => {
    expect(storageFull(noSpace())).toBeUndefined();
    expect(databaseUnavailable(noSpace())).toBeUndefined();
    const full = new DataDirFullError("/var/lib/keelson/secret.key", noSpace());
    expect(storageFull(full)).toEqual({
      where: "data-dir",
      reason: expect.stringContaining("/var/lib/keelson/secret.key"),
    });
    expect(storageFull(new Error("wrapped", { cause: full }))?.where).toBe("data-dir");
    const quota = new DataDirFullError("/d/f", Object.assign(new Error("quota"), { code: "EDQUOT" }));
    expect(quota.code).toBe("EDQUOT");
    expect(storageFull(quota)?.where).toBe("data-dir");
  });
});
