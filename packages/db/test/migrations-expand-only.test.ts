import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { classifyMigration } from "../src/migration-kind.ts";
import { MIGRATIONS } from "../src/store/index.ts";

/**
 * Every committed migration of both dialects is expand-only (the previous release runs on the
 * database it leaves: a rolling upgrade of replicas), or raises `min_binary_version` so older
 * binaries refuse to start, or is listed here with the reason the previous release still runs.
 */

const NODES_PROJECT =
  "drops nodes_project, a plain (not unique) index on project_id, in the migration that creates " +
  "nodes_project_created (project_id, created_at, name, id), which has it as a prefix: the previous release's " +
  "queries use the new index, and no rule it relies on goes";

/** Contracts by the letter that the previous release runs on all the same, and why. */
const REVIEWED: Record<string, string> = {
  "sqlite/0017_agent_links_keep_epoch":
    "SQLite can only drop a NOT NULL by rebuilding the table: agent_links is copied whole with the same columns " +
    "and `replica` made nullable (PostgreSQL's 0016 drops the NOT NULL in place); the previous release reads " +
    "and writes it as before (replicas-rolling-upgrade e2e ran across it)",
  "sqlite/0020_nodes_page_index": NODES_PROJECT,
  "postgres/0019_nodes_page_index": NODES_PROJECT,
};

const journal = (dir: string) =>
  (JSON.parse(readFileSync(join(dir, "meta", "_journal.json"), "utf8")) as { entries: { tag: string }[] }).entries.map(
    (e) => e.tag,
  );

describe("migrations are expand-only", () => {
  for (const [dialect, dir] of Object.entries(MIGRATIONS)) {
    it(`every ${dialect} migration leaves a database the previous release runs on`, () => {
      const refused: string[] = [];
      for (const tag of journal(dir)) {
        const verdict = classifyMigration(readFileSync(join(dir, `${tag}.sql`), "utf8"));
        if (verdict.expandOnly || verdict.raisesMinBinary || REVIEWED[`${dialect}/${tag}`]) continue;
        refused.push(`${tag}: ${verdict.contracts.join("; ")}`);
      }
      expect(refused).toEqual([]);
    });
  }

  it("every reviewed exception is a migration that exists and contracts", () => {
    for (const key of Object.keys(REVIEWED)) {
      const [dialect, tag] = key.split("/") as [keyof typeof MIGRATIONS, string];
      const verdict = classifyMigration(readFileSync(join(MIGRATIONS[dialect], `${tag}.sql`), "utf8"));
      expect(verdict.expandOnly, key).toBe(false);
    }
  });

  it("tells an expansion from a contraction", () => {
    const expand = [
      'CREATE TABLE "t" ("id" text PRIMARY KEY NOT NULL);',
      'ALTER TABLE "clusters" ADD COLUMN "note" text;',
      "ALTER TABLE `clusters` ADD `note` text;",
      'ALTER TABLE "clusters" ADD COLUMN "n" integer DEFAULT 0 NOT NULL;',
      'CREATE INDEX "c_i" ON "clusters" ("name");',
      'UPDATE "clusters" SET "note" = \'x\';',
      'ALTER TABLE "agent_links" ALTER COLUMN "replica" DROP NOT NULL;',
      'ALTER TABLE "nodes" ALTER COLUMN "phases" SET COMPRESSION lz4;',
    ];
    for (const sql of expand) expect(classifyMigration(sql), sql).toMatchObject({ expandOnly: true });
    const contract: [string, string][] = [
      ['ALTER TABLE "clusters" DROP COLUMN "note";', "drops a column"],
      ['DROP TABLE "t";', "drops a table"],
      ['ALTER TABLE "clusters" RENAME COLUMN "a" TO "b";', "renames"],
      ['ALTER TABLE "clusters" ALTER COLUMN "n" SET DATA TYPE bigint;', "changes a column's type"],
      ['ALTER TABLE "clusters" ALTER COLUMN "n" TYPE bigint;', "changes a column's type"],
      ['ALTER TABLE "clusters" ALTER COLUMN "note" SET NOT NULL;', "makes a column NOT NULL"],
      ['ALTER TABLE "clusters" ADD COLUMN "m" text NOT NULL;', "adds a NOT NULL column without a default"],
      ["ALTER TABLE `clusters` ADD `m` text NOT NULL;", "adds a NOT NULL column without a default"],
      ['DROP INDEX "c_i";', "drops an index"],
      ['ALTER TABLE "x" DROP CONSTRAINT "x_fk";', "drops a constraint"],
    ];
    for (const [sql, why] of contract) {
      const verdict = classifyMigration(sql);
      expect(verdict.expandOnly, sql).toBe(false);
      expect(verdict.contracts[0], sql).toContain(why);
    }
    // A contract that raises the oldest binary is declared: the old ones refuse to start on it.
    const declared = classifyMigration(
      'ALTER TABLE "clusters" DROP COLUMN "note";\n--> statement-breakpoint\n' +
        'UPDATE "keelson_schema" SET "min_binary_version" = \'0.4.0\';',
    );
    expect(declared).toMatchObject({ expandOnly: false, raisesMinBinary: true });
  });
});
