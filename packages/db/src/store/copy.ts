import { createHash } from "node:crypto";
import type Database from "better-sqlite3";
import { getTableName, type Table } from "drizzle-orm";
import { getTableConfig } from "drizzle-orm/sqlite-core";
import type postgres from "postgres";
import * as schema from "../schema.ts";

/**
 * Every table with the service's data, parents before children (the order the foreign keys
 * need). Not `keelson_schema`: the target's own migrations wrote it; nor what lives for
 * seconds or minutes (`replicas`' heartbeats, `login_failures`' windows); nor agent links and
 * commands: a stopped control plane holds no link, and an operation that resumes on the new
 * database issues its commands again with the same ids (the agent answers a repeat from its record).
 * Nor the stored events: they live an hour, and a stream client after the move starts afresh
 * (its Last-Event-ID is older than anything there: told so, routes/events.ts). Nor the token
 * sweep's last looks (`instance_token_checks`): the first sweep on the new database looks again.
 * Nor the stored packages: SQLite keeps its shelves as files in the data dir, and these tables empty.
 * Nor the heartbeats (`host_presence`): a control plane that stops writes each linked host's
 * last seen into its row as it drops the link.
 */
export const TABLES_IN_ORDER: readonly Table[] = [
  schema.projects,
  schema.users,
  schema.tokens,
  schema.cloudProviders,
  schema.nodePools,
  schema.clusters,
  schema.nodes,
  schema.operations,
  schema.externalClusters,
  // After clusters and external clusters: a join token may belong to either.
  schema.joinTokens,
  schema.addons,
  schema.clusterAccessTokens,
  schema.auditEvents,
  // Unexpired spent tokens stay spent on the new database.
  schema.webcliSpentTokens,
];

const BATCH_ROWS = 500;

export interface TableCopy {
  table: string;
  /** Rows read from SQLite, and rows PostgreSQL holds after the copy. */
  rows: number;
  copiedRows: number;
  /** sha256 of the table's rows in id order, as read from each side. */
  sourceChecksum: string;
  targetChecksum: string;
}

export interface CopyProgress {
  table: string;
  copied: number;
  total: number;
}

type Row = Record<string, unknown>;

function columnsOf(table: Table): string[] {
  return getTableConfig(table as Parameters<typeof getTableConfig>[0]).columns.map((c) => c.name);
}

/** The rows in a form both sides produce alike: values in column order, one JSON line per row. */
function checksum(rows: Row[], columns: string[]): string {
  const hash = createHash("sha256");
  for (const row of rows) hash.update(`${JSON.stringify(columns.map((c) => row[c] ?? null))}\n`);
  return hash.digest("hex");
}

/**
 * Copies every row of a SQLite database into an empty PostgreSQL database of the same schema
 * version, in one transaction (a failure leaves the target empty), value for value: text stays
 * the same text (JSON documents included), integers the same integers. Then reads both sides
 * back in id order and compares a checksum per table. Refuses a target that has any row.
 */
export async function copySqliteToPostgres(
  source: Database.Database,
  target: postgres.Sql,
  onProgress: (progress: CopyProgress) => void = () => {},
): Promise<TableCopy[]> {
  for (const table of TABLES_IN_ORDER) {
    const name = getTableName(table);
    const [found] = await target`select count(*)::int as n from ${target(name)}`;
    if ((found?.n ?? 0) > 0) throw new Error(`the target database is not empty: ${name} has ${found?.n} rows`);
  }
  // One read transaction: the copy is a consistent snapshot even if something writes meanwhile.
  const read = source.transaction(() =>
    TABLES_IN_ORDER.map((table) => {
      const name = getTableName(table);
      const rows = source.prepare(`select * from "${name}" order by "id"`).all() as Row[];
      return { table, name, rows };
    }),
  );
  const snapshot = read();
  await target.begin(async (tx) => {
    for (const { table, name, rows } of snapshot) {
      const columns = columnsOf(table);
      onProgress({ table: name, copied: 0, total: rows.length });
      for (let i = 0; i < rows.length; i += BATCH_ROWS) {
        const batch = rows.slice(i, i + BATCH_ROWS);
        await tx`insert into ${tx(name)} ${tx(batch as Record<string, postgres.ParameterOrJSON<never>>[], columns)}`;
        onProgress({ table: name, copied: Math.min(rows.length, i + BATCH_ROWS), total: rows.length });
      }
    }
  });
  const result: TableCopy[] = [];
  for (const { table, name, rows } of snapshot) {
    const columns = columnsOf(table);
    // "C" collation: byte order, as SQLite sorts text.
    const copied = (await target`select * from ${target(name)} order by "id" collate "C"`) as unknown as Row[];
    result.push({
      table: name,
      rows: rows.length,
      copiedRows: copied.length,
      sourceChecksum: checksum(rows, columns),
      targetChecksum: checksum(copied, columns),
    });
  }
  return result;
}
