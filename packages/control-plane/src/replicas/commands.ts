import { agentCommands, type Db, databaseTime, dialectOf, inJsonArray, operations, rowsOf } from "@keelson/db";
import { and, eq, exists, gt, inArray, isNull, lt, or, type SQL, sql } from "drizzle-orm";

/**
 * The agent_commands table (DESIGN.md "Replicas"): commands to agents, durable, so that the
 * replica issuing one need not be the one holding the host's link, and an agent that links
 * again (to any replica) gets its unanswered commands with the same ids. The statements take
 * many rows at once (agents/statement-batch.ts).
 */

export interface NewCommand {
  id: string;
  hostId: string;
  name: string;
  payload: unknown;
  timeoutMs: number;
  /** The operation that issues it and the fence of its claim: never sent once the fence moved on. */
  operationId: string | null;
  fence: number | null;
  /**
   * Inserted as sent, claimed by this issue, when its fence holds (checked in the insert): the
   * issuer holds the host's link and sends it at once, which saves the pending-to-sent UPDATE
   * (a row version and its three index entries per node of a rollout). Otherwise pending.
   */
  claim?: boolean;
}

/** A command as inserted, or as it already was: an id answered before keeps its answer. */
export interface IssuedCommand {
  id: string;
  state: string;
  result: unknown;
}

/** What a replica needs to send a command on a link. */
export interface SendableCommand {
  id: string;
  hostId: string;
  name: string;
  payload: unknown;
  timeoutMs: number;
}

export interface Answer {
  id: string;
  hostId: string;
  /** The result frame without its type: `{ok: true, result}` or `{ok: false, error}`. */
  result: unknown;
}

/**
 * Inserts commands; an id already there (a step issuing it again, after a restart or on another
 * replica) is waiting again under the new fence and expiry, unless it was answered: then its
 * answer stands. A claimed row is `sent` when its fence holds, as markSent would decide: the
 * rows are joined to their operations' claims once (a batch's commands share one), not checked
 * by a subquery per row. One statement for all.
 */
export async function insertCommands(db: Db, rows: readonly NewCommand[]): Promise<IssuedCommand[]> {
  if (rows.length === 0) return [];
  const dialect = dialectOf(db);
  const batch = rowsOf(
    rows.map((r) => ({ ...r, claim: r.claim ? 1 : 0 })),
    {
      r_id: { key: "id", type: "text" },
      r_host: { key: "hostId", type: "text" },
      r_name: { key: "name", type: "text" },
      r_payload: { key: "payload", type: "json" },
      r_timeout: { key: "timeoutMs", type: "integer" },
      r_operation: { key: "operationId", type: "text" },
      r_fence: { key: "fence", type: "integer" },
      r_claim: { key: "claim", type: "integer" },
    },
  );
  // Sent only if claimed and of no operation, or of one whose claim still has this fence.
  const state = sql`case when r.r_claim = 1 and (r.r_operation is null or o.id is not null) then 'sent' else 'pending' end`;
  return await db
    .insert(agentCommands)
    .select(
      sql`select r.r_id, r.r_host, r.r_name, r.r_payload, r.r_timeout, r.r_operation, r.r_fence, ${state}, null,
        ${databaseTime(dialect)}, ${databaseTime(dialect, sql`r.r_timeout`)}
        from ${batch} as r left join ${operations} as o
          on o.id = r.r_operation and o.fence = r.r_fence and o.state = 'running'
        where true`, // SQLite: without a WHERE, its parser takes ON CONFLICT for the join's ON.
    )
    .onConflictDoUpdate({
      target: agentCommands.id,
      set: {
        state: sql`case when ${agentCommands.state} = 'answered' then 'answered' else excluded.state end`,
        expiresAt: sql`excluded.expires_at`,
        timeoutMs: sql`excluded.timeout_ms`,
        operationId: sql`excluded.operation_id`,
        fence: sql`excluded.fence`,
      },
    })
    .returning({ id: agentCommands.id, state: agentCommands.state, result: agentCommands.result });
}

/** Whether a command of `operationId` issued under `fence` may go out: its claim still has that fence. */
function fenceHolds(
  db: Db,
  operationId: typeof agentCommands.operationId | string,
  fence: typeof agentCommands.fence | number,
): SQL {
  return exists(
    db
      .select({ one: sql`1` })
      .from(operations)
      .where(and(eq(operations.id, operationId), eq(operations.fence, fence), eq(operations.state, "running"))),
  );
}

/**
 * The condition under which a command may go out: unanswered, unexpired, and either of no
 * operation or of one whose claim still has the fence it was issued under.
 */
function sendable(db: Db): SQL {
  const fenceHeld = or(
    isNull(agentCommands.operationId),
    fenceHolds(db, agentCommands.operationId, agentCommands.fence),
  );
  return and(
    inArray(agentCommands.state, ["pending", "sent"]),
    gt(agentCommands.expiresAt, databaseTime(dialectOf(db))),
    fenceHeld,
  ) as SQL;
}

/**
 * Marks as sent, and answers, the commands that may go out now: of `ids`, those not sent yet
 * (each issue of a command is claimed by one send, however many wake-ups ask for it: the
 * issuer's own, another replica's notice, a catch-up; issuing an id again makes it pending
 * again), or every unanswered one of `hostIds` (a host that just linked gets them again). The
 * fence is checked in this same statement, so a command of a former owner is never sent.
 */
export async function markSent(
  db: Db,
  which: { ids: readonly string[] } | { hostIds: readonly string[] },
): Promise<SendableCommand[]> {
  // One statement text for any number of ids (inJsonArray), prepared once per connection: the
  // holder of spread agents' links marks a few commands at a time, a new count each time.
  const dialect = dialectOf(db);
  const scope =
    "ids" in which
      ? and(inJsonArray(dialect, agentCommands.id, which.ids), eq(agentCommands.state, "pending"))
      : inJsonArray(dialect, agentCommands.hostId, which.hostIds);
  if (("ids" in which ? which.ids : which.hostIds).length === 0) return [];
  return await db
    .update(agentCommands)
    .set({ state: "sent" })
    .where(and(scope, sendable(db)))
    .returning({
      id: agentCommands.id,
      hostId: agentCommands.hostId,
      name: agentCommands.name,
      payload: agentCommands.payload,
      timeoutMs: agentCommands.timeoutMs,
    });
}

/**
 * Records agents' answers, each only for a command of the host that answers it and not
 * answered yet; answers the ids recorded (a late or repeated answer is not). The answers are
 * joined as rows (rowsOf: a few statement texts for any number, where a CASE per answer was a
 * new text, parsed and described again, for every count). An id once per call (the caller's
 * batch keys on it): an UPDATE … FROM with two source rows for one target applies either.
 */
export async function recordAnswers(db: Db, answers: readonly Answer[]): Promise<Set<string>> {
  if (answers.length === 0) return new Set();
  const batch = rowsOf(
    answers.map((a) => ({ ...a })),
    {
      r_id: { key: "id", type: "text" },
      r_host: { key: "hostId", type: "text" },
      r_result: { key: "result", type: "json" },
    },
  );
  const rows = await db
    .update(agentCommands)
    .set({ state: "answered", result: sql`r.r_result` })
    .from(sql`${batch} as r`)
    .where(
      and(
        eq(agentCommands.id, sql`r.r_id`),
        eq(agentCommands.hostId, sql`r.r_host`),
        inArray(agentCommands.state, ["pending", "sent", "expired"]),
      ),
    )
    .returning({ id: agentCommands.id });
  return new Set(rows.map((r) => r.id));
}

/** The answer of a command, if it has one. */
export async function answerOf(db: Db, ids: readonly string[]): Promise<{ id: string; result: unknown }[]> {
  if (ids.length === 0) return [];
  return await db
    .select({ id: agentCommands.id, result: agentCommands.result })
    .from(agentCommands)
    .where(and(inJsonArray(dialectOf(db), agentCommands.id, ids), eq(agentCommands.state, "answered")));
}

/** A claimed command that could not be sent after all: pending again, for the link's holder to send. */
export async function releaseClaim(db: Db, id: string): Promise<void> {
  await db
    .update(agentCommands)
    .set({ state: "pending" })
    .where(and(eq(agentCommands.id, id), eq(agentCommands.state, "sent")));
}

/** A command whose issuer stopped waiting (its timeout): never sent from now on. */
export async function expireCommand(db: Db, id: string): Promise<void> {
  await db
    .update(agentCommands)
    .set({ state: "expired" })
    .where(and(eq(agentCommands.id, id), inArray(agentCommands.state, ["pending", "sent"])));
}

/** Commands waiting to be sent (a replica catching up after its LISTEN connection was away). */
export async function unsentCommands(db: Db): Promise<{ id: string; hostId: string }[]> {
  return await db
    .select({ id: agentCommands.id, hostId: agentCommands.hostId })
    .from(agentCommands)
    .where(and(eq(agentCommands.state, "pending"), gt(agentCommands.expiresAt, databaseTime(dialectOf(db)))));
}

/** Deletes commands answered or expired more than `retentionMs` ago; answers how many. */
export async function pruneCommands(db: Db, retentionMs: number): Promise<number> {
  const gone = await db
    .delete(agentCommands)
    .where(lt(agentCommands.expiresAt, databaseTime(dialectOf(db), -retentionMs)))
    .returning({ id: agentCommands.id });
  return gone.length;
}
