import postgres from "postgres";

/**
 * PostgreSQL's own account of where its time goes (the pg_stat_statements extension), for a
 * benchmark that asks with BENCH_PG_STATEMENTS=1: the server must start with the library
 * preloaded (SETTINGS), and the database must be the one the keelson-server writes.
 */
export const PG_STATEMENTS = process.env.BENCH_PG_STATEMENTS === "1";

/** The startPostgres settings that load the extension. */
export const SETTINGS: Record<string, string> = PG_STATEMENTS
  ? { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" }
  : {};

export interface StatementStats {
  /** Forgets what was counted so far (the setup's statements). */
  reset(): Promise<void>;
  /**
   * The `limit` statements that took the most execution time since the reset, as table rows.
   * Texts that differ only in the length of a VALUES list (rowsOf pads a batch to a power of
   * two: one text per size) count as one statement; `texts` says how many they were.
   */
  top(limit?: number): Promise<string[]>;
  close(): Promise<void>;
}

/** Installs the extension in the database at `url` (as the server's superuser) and reads it there. */
export async function statementStats(url: string): Promise<StatementStats> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  await sql`create extension if not exists pg_stat_statements`;
  return {
    async reset() {
      await sql`select pg_stat_statements_reset()`;
    },
    async top(limit = 15) {
      const rows = await sql<
        { texts: string; calls: string; total: number; mean: number; rows: string; blks: string; query: string }[]
      >`select count(*)::text as texts, sum(calls)::text as calls, sum(total_exec_time) as total,
          sum(total_exec_time) / sum(calls) as mean, sum(rows)::text as rows, sum(blks)::text as blks,
          min(query) as query
        from (select calls, total_exec_time, rows,
                shared_blks_hit + shared_blks_read + shared_blks_dirtied as blks,
                regexp_replace(query, '\\s+', ' ', 'g') as query,
                -- $1, $2… as $, then every row of a VALUES list but its last dropped
                regexp_replace(regexp_replace(query, '\\$\\d+', '$', 'g'), '(\\(\\$(, \\$)*\\), )+', '', 'g') as shape
              from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())) s
        group by shape order by sum(total_exec_time) desc limit ${limit}`;
      return [
        "| calls | total ms | mean ms | rows | buffers | texts | statement |",
        "|---|---|---|---|---|---|---|",
        ...rows.map(
          (r) =>
            `| ${r.calls} | ${r.total.toFixed(0)} | ${r.mean.toFixed(3)} | ${r.rows} | ${r.blks} | ${r.texts} | \`${r.query.slice(0, 160)}\` |`,
        ),
      ];
    },
    close: () => sql.end(),
  };
}
