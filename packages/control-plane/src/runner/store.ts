import { randomUUID } from "node:crypto";
import { type Db, dialectOf, firstRow, jsonIntegerAt, operations, type Tx } from "@keelson/db";
import { and, asc, desc, eq, getTableColumns, inArray, type SQL, sql } from "drizzle-orm";
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

/** The condition of an operation that has not ended: waiting for the runner, or running. */
export function isUnfinished(): SQL {
  return inArray(operations.state, ["pending", "running"]);
}

/**
 * The params of the unfinished operations of one kind, on one target or in one project, oldest
 * first: what requests still in flight have claimed (the nodes a detach or a restart takes).
 */
export async function unfinishedParams(
  db: Tx,
  kind: string,
  scope: { targetId: string } | { projectId: string },
): Promise<unknown[]> {
  const where =
    "targetId" in scope ? eq(operations.targetId, scope.targetId) : eq(operations.projectId, scope.projectId);
  const rows = await db
    .select({ params: operations.params })
    .from(operations)
    .where(and(where, eq(operations.kind, kind), isUnfinished()))
    .orderBy(asc(operations.createdAt), asc(operations.id));
  return rows.map((r) => r.params);
}

/**
 * The oldest unfinished operation on `targetId` (of these kinds): what it is, without its params
 * and progress. Those name every node of a rollout (about 120 KB at 1,000 nodes), and the
 * health follower asks this every 200 ms while one runs.
 */
export async function activeOperationFor(
  tx: Tx,
  targetId: string,
  kinds?: string[],
): Promise<Pick<OperationRow, "id" | "kind" | "state"> | undefined> {
  const conditions = [eq(operations.targetId, targetId), isUnfinished()];
  if (kinds) conditions.push(inArray(operations.kind, kinds));
  return firstRow(
    await tx
      .select({ id: operations.id, kind: operations.kind, state: operations.state })
      .from(operations)
      .where(and(...conditions))
      // Ties by id, as the runner's claims order them (leases.ts).
      .orderBy(asc(operations.createdAt), asc(operations.id))
      .limit(1),
  );
}

/** The params of one operation (undefined: no such operation). */
export async function operationParams(tx: Tx, id: string): Promise<OperationRow["params"] | undefined> {
  return firstRow(await tx.select({ params: operations.params }).from(operations).where(eq(operations.id, id)))?.params;
}

/**
 * What the API shows of an operation: every column but the cursor, the cursor's step read by
 * the database, and the params as the JSON text stored. A rollout's cursor names each of its
 * nodes (tens of KB for 1,000) and is rewritten every 250 ms, and its params name them too
 * (about 40 KB): clients poll the operation while it runs, and reading the whole cursor for its
 * step, or parsing the params to serialise them again, made each poll cost milliseconds of the
 * rollout's CPU.
 */
export type OperationSummary = Omit<OperationRow, "cursor" | "fence" | "leaseUntil" | "params"> & {
  step: number | null;
  /** The params' JSON text as recorded (JSON.stringify of them: the text they serialise to). */
  paramsJson: string;
};

function summaryColumns(db: Db) {
  const {
    cursor: _cursor,
    fence: _fence,
    leaseUntil: _leaseUntil,
    params: _params,
    ...columns
  } = getTableColumns(operations);
  return {
    ...columns,
    paramsJson: sql<string>`${operations.params}`,
    step: jsonIntegerAt(dialectOf(db), operations.cursor, "step"),
  };
}

export async function listOperations(
  db: Db,
  projectId: string,
  filter: { targetId?: string; state?: OperationRow["state"]; limit: number },
): Promise<OperationSummary[]> {
  const conditions = [eq(operations.projectId, projectId)];
  if (filter.targetId) conditions.push(eq(operations.targetId, filter.targetId));
  if (filter.state) conditions.push(eq(operations.state, filter.state));
  return await db
    .select(summaryColumns(db))
    .from(operations)
    .where(and(...conditions))
    .orderBy(desc(operations.createdAt))
    .limit(filter.limit);
}

/** One operation by id, whatever its project (the caller checks who may see it). */
export async function operationById(db: Db, id: string): Promise<OperationSummary | undefined> {
  return firstRow(await db.select(summaryColumns(db)).from(operations).where(eq(operations.id, id)));
}
