import { AsyncLocalStorage } from "node:async_hooks";

/**
 * What the audit trail knows of the request being served, carried across its awaits (and into
 * the transactions it opens) by AsyncLocalStorage.
 */
export interface AuditContext {
  /** The record's id, fixed up front so the transaction's insert and the answer's update meet. */
  readonly id: string;
  /** When the request arrived (ISO-8601). */
  readonly at: string;
  /** Whether this request is recorded at all (writes, logins, credentials; not plain reads). */
  recorded: boolean;
  /** A transaction is writing the record now (claimed) or has committed it (committed). */
  state: "none" | "claimed" | "committed";
  /** Set once the answer is recorded: transactions that outlive the request record nothing. */
  finished: boolean;
  /** Filled as the request goes: the operation it started and that operation's target. */
  operationId: string | null;
  operationTarget: string | null;
  /**
   * The record as known when a transaction writes it (who, where from, what route). Dropped
   * once the request is finished: timers started inside it keep the context, not the request.
   */
  base: (() => AuditBase) | null;
}

export interface AuditBase {
  actor: "admin" | "token" | "session" | "anonymous";
  userId: string | null;
  tokenId: string | null;
  projectId: string | null;
  source: string;
  method: string;
  route: string;
  target: string | null;
  credential: string | null;
}

export const auditStorage = new AsyncLocalStorage<AuditContext>();

/** The operation runner says which operation a request started (runner/store.ts). */
export function noteOperationStarted(operationId: string, targetId: string): void {
  const context = auditStorage.getStore();
  if (!context || context.finished || context.operationId !== null) return;
  context.operationId = operationId;
  context.operationTarget = targetId;
}
