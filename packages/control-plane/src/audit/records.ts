import { auditEvents, type Db, type Tx } from "@keelson/db";
import { and, asc, eq, gt, gte, lt, lte, or, type SQL } from "drizzle-orm";
import { badRequest } from "../http/errors.ts";
import type { AuditBase } from "./context.ts";

/** The audit trail's rows: written with the change they record (http.ts), read by GET /v1/audit. */

export type AuditRecord = typeof auditEvents.$inferSelect;

/** A record as written: its fields as known at that moment, `status` null until the answer. */
export function auditRow(id: string, at: string, fields: AuditBase, status: number | null, operationId: string | null) {
  return { id, at, ...fields, status, operationId };
}

/** The record a change's transaction writes; the answer's upsert may have come first (then it stands). */
export async function insertAuditRecord(tx: Tx, row: AuditRecord): Promise<void> {
  await tx.insert(auditEvents).values(row).onConflictDoNothing({ target: auditEvents.id });
}

/** The record with the answer's facts: new, or over the one a transaction committed. */
export async function upsertAuditRecord(db: Db, row: AuditRecord): Promise<void> {
  const { id: _id, at: _at, ...rest } = row;
  await db.insert(auditEvents).values(row).onConflictDoUpdate({ target: auditEvents.id, set: rest });
}

export interface AuditFilter {
  since?: string;
  until?: string;
  userId?: string;
  projectId?: string;
  target?: string;
  /** Keyset pagination: the records after this one, in (at, id) order. */
  cursor?: string;
  limit: number;
}

function timestamp(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw badRequest(field, `${field} must be an ISO-8601 timestamp`);
  return new Date(ms).toISOString();
}

export function encodeCursor(record: Pick<AuditRecord, "at" | "id">): string {
  return Buffer.from(JSON.stringify([record.at, record.id])).toString("base64url");
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string")) {
      return value as [string, string];
    }
  } catch {}
  throw badRequest("cursor", "cursor must be a nextCursor this endpoint answered");
}

/** One page of records, oldest first, and the cursor of the next page (null at the end). */
export async function listAuditRecords(
  db: Db,
  filter: AuditFilter,
): Promise<{ records: AuditRecord[]; nextCursor: string | null }> {
  const since = timestamp("since", filter.since);
  const until = timestamp("until", filter.until);
  const where: (SQL | undefined)[] = [
    since === undefined ? undefined : gte(auditEvents.at, since),
    until === undefined ? undefined : lte(auditEvents.at, until),
    filter.userId === undefined ? undefined : eq(auditEvents.userId, filter.userId),
    filter.projectId === undefined ? undefined : eq(auditEvents.projectId, filter.projectId),
    filter.target === undefined ? undefined : eq(auditEvents.target, filter.target),
  ];
  if (filter.cursor !== undefined) {
    const [at, id] = decodeCursor(filter.cursor);
    where.push(or(gt(auditEvents.at, at), and(eq(auditEvents.at, at), gt(auditEvents.id, id))));
  }
  const rows = await db
    .select()
    .from(auditEvents)
    .where(and(...where))
    .orderBy(asc(auditEvents.at), asc(auditEvents.id))
    .limit(filter.limit + 1);
  const records = rows.slice(0, filter.limit);
  const last = records.at(-1);
  return { records, nextCursor: rows.length > filter.limit && last ? encodeCursor(last) : null };
}

/** Every record the filter selects, page by page (the JSON-lines export). */
export async function* allAuditRecords(db: Db, filter: Omit<AuditFilter, "limit">): AsyncGenerator<AuditRecord> {
  let cursor = filter.cursor;
  for (;;) {
    const page = await listAuditRecords(db, { ...filter, cursor, limit: 1000 });
    yield* page.records;
    if (!page.nextCursor) return;
    cursor = page.nextCursor;
  }
}

/** Removes the records older than the retention; answers how many went. */
export async function pruneAuditRecords(db: Db, retentionDays: number, now = new Date()): Promise<number> {
  if (retentionDays === 0) return 0;
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000).toISOString();
  const gone = await db.delete(auditEvents).where(lt(auditEvents.at, cutoff)).returning({ id: auditEvents.id });
  return gone.length;
}
