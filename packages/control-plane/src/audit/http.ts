import { randomUUID } from "node:crypto";
import type { Db } from "@keelson/db";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { projectParam } from "../http/auth.ts";
import { logWriteFailure } from "../storage/log-failure.ts";
import { type AuditBase, type AuditContext, auditStorage } from "./context.ts";
import { auditRow, insertAuditRecord, upsertAuditRecord } from "./records.ts";

/**
 * The audit trail's HTTP side (issue 16). Each recorded request (any method but GET/HEAD/
 * OPTIONS, and the reads that issue a credential) gets one record:
 * - when it changes something in a transaction, that transaction writes the record (status
 *   still null) with the change, so nothing done goes unrecorded even if the process dies
 *   before answering; the answer then fills in status and what it created;
 * - otherwise (refused, failed before any transaction, or a write outside one) the record is
 *   written once the answer is sent.
 * Never a body, header or query string: only who, where from, the route, the target ids.
 */

declare module "fastify" {
  interface FastifyContextConfig {
    /** The credential a successful call issues (`session token`, `kubeconfig`, …): recorded even on GET. */
    issues?: string;
    /** Where the target comes from when the path does not name it (the login's attempted user). */
    auditTarget?: (request: FastifyRequest) => string | null;
  }
  interface FastifyRequest {
    audit: AuditContext | null;
    /** What the answer created or named (its id), for the record; never the answer itself. */
    auditAnswer: { id?: string; userId?: string; projectId?: string; sessionId?: string } | null;
  }
}

const READS = new Set(["GET", "HEAD", "OPTIONS"]);
const PROJECT_PARAMS = new Set(["projectId", "project_uuid"]);

function pathTarget(request: FastifyRequest): string | null {
  const params = Object.entries((request.params as Record<string, string> | undefined) ?? {});
  const named = params.filter(([name]) => !PROJECT_PARAMS.has(name));
  return named.at(-1)?.[1] ?? null;
}

function fieldsOf(request: FastifyRequest, context: AuditContext, status: number | null): AuditBase {
  const identity = request.identity;
  const answer = request.auditAnswer;
  const config = request.routeOptions.config;
  let target: string | null = null;
  try {
    target = config?.auditTarget?.(request) ?? null;
  } catch {
    target = null;
  }
  const succeeded = status !== null && status < 400;
  const base = {
    source: request.ip,
    method: request.method,
    route: request.routeOptions.url ?? request.url.split("?")[0] ?? "",
    target:
      (succeeded ? answer?.userId : undefined) ??
      target ??
      pathTarget(request) ??
      context.operationTarget ??
      answer?.id ??
      null,
    credential: succeeded && config?.issues ? config.issues : null,
  };
  if (identity?.kind === "admin") {
    return { ...base, actor: "admin", userId: null, tokenId: null, projectId: projectParam(request) ?? null };
  }
  if (identity?.kind === "project") {
    return {
      ...base,
      actor: identity.userId ? "session" : "token",
      userId: identity.userId,
      tokenId: identity.tokenId,
      projectId: identity.projectId,
    };
  }
  // No token: a login (the session it opened, when it did) or an agent's registration.
  return {
    ...base,
    actor: answer?.sessionId ? "session" : "anonymous",
    userId: succeeded ? (answer?.userId ?? null) : null,
    tokenId: succeeded ? (answer?.sessionId ?? null) : null,
    projectId: (succeeded ? answer?.projectId : undefined) ?? projectParam(request) ?? null,
  };
}

/** Ids of what a JSON answer created or names; nothing else of it is kept. */
function answerIds(payload: string): FastifyRequest["auditAnswer"] {
  try {
    const body = JSON.parse(payload) as Record<string, unknown>;
    const token = body.token as { user?: { id?: string }; project?: { id?: string }; audit_ids?: string[] } | undefined;
    if (token && typeof token === "object" && token.user) {
      return { userId: token.user.id, projectId: token.project?.id, sessionId: token.audit_ids?.[0] };
    }
    const id = body.uuid ?? body.id ?? body.hostId;
    return typeof id === "string" ? { id } : null;
  } catch {
    return null;
  }
}

const WRAPPED = Symbol("audit transactions");

/**
 * Makes the first transaction a recorded request commits carry its audit record. Once per
 * database (a restarted app in a test reuses none, but the guard costs nothing).
 */
function recordInTransactions(db: Db): void {
  const marked = db as Db & { [WRAPPED]?: true };
  if (marked[WRAPPED]) return;
  marked[WRAPPED] = true;
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: Parameters<Db["transaction"]>[0], config?: Parameters<Db["transaction"]>[1]) => {
    const context = auditStorage.getStore();
    const base = context?.base;
    if (!context?.recorded || context.finished || context.state !== "none" || !base) {
      return transaction(fn, config);
    }
    context.state = "claimed";
    return transaction(async (tx) => {
      const result = await fn(tx);
      await insertAuditRecord(tx, auditRow(context.id, context.at, base(), null, context.operationId));
      return result;
    }, config).then(
      (result) => {
        context.state = "committed";
        return result;
      },
      (err: unknown) => {
        context.state = "none";
        throw err;
      },
    );
  }) as Db["transaction"];
}

export function installAudit(app: FastifyInstance, db: Db): void {
  recordInTransactions(db);
  app.decorateRequest("audit", null);
  app.decorateRequest("auditAnswer", null);
  // Before the auth hook: a refused write is recorded too.
  app.addHook("onRequest", (request, _reply, done) => {
    const recorded = !request.is404 && (!READS.has(request.method) || !!request.routeOptions.config?.issues);
    const context: AuditContext = {
      id: randomUUID(),
      at: new Date().toISOString(),
      recorded,
      state: "none",
      finished: false,
      operationId: null,
      operationTarget: null,
      base: () => fieldsOf(request, context, null),
    };
    request.audit = context;
    auditStorage.run(context, done);
  });
  // The body arrives on the socket's events, outside the context: enter it again for the handler.
  app.addHook("preValidation", (request, _reply, done) => {
    if (request.audit) auditStorage.run(request.audit, done);
    else done();
  });
  /** Closes the request's record: no later transaction joins it, and the row gets the status. */
  async function finish(request: FastifyRequest, context: AuditContext, status: number): Promise<void> {
    context.finished = true;
    context.base = null;
    if (!context.recorded) return;
    const row = auditRow(context.id, context.at, fieldsOf(request, context, status), status, context.operationId);
    try {
      await upsertAuditRecord(db, row);
    } catch (err) {
      logWriteFailure(request.log, err, { audit: row.id }, "the audit record of this request could not be written");
    }
  }
  app.addHook("onSend", async (request, reply, payload) => {
    const context = request.audit;
    if (context?.recorded && typeof payload === "string" && reply.statusCode < 400) {
      request.auditAnswer = answerIds(payload);
    }
    // The record is complete before the answer leaves, so the client's next request (a read
    // right after its write) does not race the record's write: on SQLite that read queued
    // behind it, and on either store the write moved the change stamp while the read computed
    // its answer, which then could not be cached (the "cold read", issue 18). A 5xx answer
    // does not wait: the store may be why it failed.
    if (context && !context.finished && reply.statusCode < 500) await finish(request, context, reply.statusCode);
    return payload;
  });
  app.addHook("onResponse", async (request, reply) => {
    const context = request.audit;
    if (context && !context.finished) await finish(request, context, reply.statusCode);
  });
}
