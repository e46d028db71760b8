/**
 * The order of the node and host lists, (creation time, name, uuid), and where a page of them
 * starts (http/paging.ts): the rows after a marker's place in that order. Indexes
 * `nodes_project_created` (a project's list) and `nodes_created` (the admin's hosts) hold the
 * same order, so a page reads its rows, not the list.
 */
import { type Db, firstRow, nodes } from "@keelson/db";
import { and, asc, eq, type SQL, sql } from "drizzle-orm";
import { FIRST_PAGE, type Marker } from "../../http/paging.ts";

export const NODE_LIST_ORDER = [asc(nodes.createdAt), asc(nodes.name), asc(nodes.id)];

/** A row's marker: its place in the list order. */
export function nodeMarkerOf(row: { createdAt: string; name: string; id: string }): Marker {
  return { at: row.createdAt, id: row.id, name: row.name };
}

/**
 * The rows of `scope` (the list's rows: a project's, or every one for the admin) after `after`
 * in the list order (all of them from the first page). A row-value comparison, which both
 * SQLite and PostgreSQL answer with a range of the index.
 */
export async function afterNode(db: Db, scope: SQL | undefined, after: Marker | undefined): Promise<SQL | undefined> {
  const place = await placeOf(db, scope, after ?? FIRST_PAGE);
  return and(scope, sql`(${nodes.createdAt}, ${nodes.name}, ${nodes.id}) > (${place.at}, ${place.name}, ${place.id})`);
}

/**
 * A marker without the name (the pair markers were before it was added) is placed by its row's
 * name; with that row gone (or not in the list: a marker tells nothing of rows the caller cannot
 * see), before every row created at its time, so that nothing after it is skipped.
 */
async function placeOf(db: Db, scope: SQL | undefined, marker: Marker): Promise<Required<Marker>> {
  if (marker.name !== undefined) return { at: marker.at, id: marker.id, name: marker.name };
  const row = firstRow(
    await db
      .select({ name: nodes.name, at: nodes.createdAt })
      .from(nodes)
      .where(and(scope, eq(nodes.id, marker.id))),
  );
  return row ? { at: row.at, id: marker.id, name: row.name } : { at: marker.at, id: "", name: "" };
}
