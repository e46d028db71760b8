import { randomUUID } from "node:crypto";
import { type Db, operations, type Tx } from "@keelson/db";
import { and, desc, eq, inArray } from "drizzle-orm";
import type { OperationRow } from "./types.ts";

export interface NewOperation {
  projectId: string;
  kind: string;
  targetType: string;
  targetId: string;
  /** The kind's own parameters (its `…Params` interface); stored as JSON. */
  params?: object;
}

/** Inserts an operation; call inside the transaction that makes the change it carries out. */
export function recordOperation(tx: Tx, input: NewOperation): OperationRow {
  return tx
    .insert(operations)
    .values({
      id: randomUUID(),
      projectId: input.projectId,
      kind: input.kind,
      targetType: input.targetType,
      targetId: input.targetId,
      // The column holds every kind's params; each kind reads back the interface it wrote.
      params: (input.params ?? {}) as Record<string, unknown>,
      state: "pending",
      cursor: { step: 0, progress: {} },
    })
    .returning()
    .get();
}

export function unfinishedOperations(db: Db): OperationRow[] {
  return db
    .select()
    .from(operations)
    .where(inArray(operations.state, ["pending", "running"]))
    .orderBy(operations.createdAt)
    .all();
}

export function activeOperationFor(tx: Tx, targetId: string, kinds?: string[]): OperationRow | undefined {
  const conditions = [eq(operations.targetId, targetId), inArray(operations.state, ["pending", "running"])];
  if (kinds) conditions.push(inArray(operations.kind, kinds));
  return tx
    .select()
    .from(operations)
    .where(and(...conditions))
    .orderBy(operations.createdAt)
    .limit(1)
    .get();
}

export function listOperations(
  db: Db,
  projectId: string,
  filter: { targetId?: string; state?: OperationRow["state"]; limit: number },
): OperationRow[] {
  const conditions = [eq(operations.projectId, projectId)];
  if (filter.targetId) conditions.push(eq(operations.targetId, filter.targetId));
  if (filter.state) conditions.push(eq(operations.state, filter.state));
  return db
    .select()
    .from(operations)
    .where(and(...conditions))
    .orderBy(desc(operations.createdAt))
    .limit(filter.limit)
    .all();
}
