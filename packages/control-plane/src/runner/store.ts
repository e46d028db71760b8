import { randomUUID } from "node:crypto";
import { type Db, firstRow, operations, type Tx } from "@keelson/db";
import { and, desc, eq, inArray } from "drizzle-orm";
import { noteOperationStarted } from "../audit/context.ts";
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
export async function recordOperation(tx: Tx, input: NewOperation): Promise<OperationRow> {
  const [row] = await tx
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
    .returning();
  if (!row) throw new Error("the operation insert returned no row");
  // The audit record of the request that started it names it (and its target), same transaction.
  noteOperationStarted(row.id, row.targetId);
  return row;
}

export async function unfinishedOperations(db: Db): Promise<OperationRow[]> {
  return await db
    .select()
    .from(operations)
    .where(inArray(operations.state, ["pending", "running"]))
    .orderBy(operations.createdAt);
}

export async function activeOperationFor(
  tx: Tx,
  targetId: string,
  kinds?: string[],
): Promise<OperationRow | undefined> {
  const conditions = [eq(operations.targetId, targetId), inArray(operations.state, ["pending", "running"])];
  if (kinds) conditions.push(inArray(operations.kind, kinds));
  return firstRow(
    await tx
      .select()
      .from(operations)
      .where(and(...conditions))
      .orderBy(operations.createdAt)
      .limit(1),
  );
}

export async function listOperations(
  db: Db,
  projectId: string,
  filter: { targetId?: string; state?: OperationRow["state"]; limit: number },
): Promise<OperationRow[]> {
  const conditions = [eq(operations.projectId, projectId)];
  if (filter.targetId) conditions.push(eq(operations.targetId, filter.targetId));
  if (filter.state) conditions.push(eq(operations.state, filter.state));
  return await db
    .select()
    .from(operations)
    .where(and(...conditions))
    .orderBy(desc(operations.createdAt))
    .limit(filter.limit);
}
