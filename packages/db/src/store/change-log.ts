import { count, eq, lt, sql } from "drizzle-orm";
import { changeLog } from "../schema.ts";
import { databaseTime, dialectOf, type Prepared, prepare } from "./portable.ts";
import type { Db } from "./types.ts";

/** The groups of reads the database's triggers keep a change log for (schema.ts changeLog). */
export type ChangeScope = "clusters";

/** Rows older than this are pruned: a stamp only has to outlive the read it guards. */
export const CHANGE_LOG_RETENTION_MS = 60_000;

const prepared = new WeakMap<Db, Prepared<{ rows: number; ids: string | null }>>();

function stampQuery(db: Db) {
  let query = prepared.get(db);
  if (!query) {
    query = prepare(
      db,
      "change_log_stamp",
      db
        .select({ rows: count(), ids: sql<string | null>`cast(sum(${changeLog.id}) as text)` })
        .from(changeLog)
        .where(eq(changeLog.scope, sql.placeholder("scope"))),
    );
    prepared.set(db, query);
  }
  return query;
}

/**
 * A value that changes whenever a change to `scope`'s reads commits, whoever wrote it: the
 * log's row count and the sum of its ids. A commit adds a row (the count moves); a prune
 * removes old rows (the count falls); both between two reads leave the sum changed, because a
 * row added now has a larger id than every row old enough to be pruned. So two equal stamps
 * mean nothing in the scope committed in between: a cache may serve what it computed under it.
 * (The one way round it: a writing transaction open longer than the retention, whose row is
 * pruned as it commits. Keelson's transactions last milliseconds; PostgreSQL's statement
 * timeout bounds each of their statements.)
 */
export async function changeLogStamp(db: Db, scope: ChangeScope): Promise<string> {
  const row = await stampQuery(db).get({ scope });
  return `${row?.rows ?? 0}:${row?.ids ?? 0}`;
}

/** Deletes the rows past the retention (by the database's clock); how many went. */
export async function pruneChangeLog(db: Db, retentionMs = CHANGE_LOG_RETENTION_MS): Promise<number> {
  const gone = await db
    .delete(changeLog)
    .where(lt(changeLog.createdAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: changeLog.id });
  return gone.length;
}
