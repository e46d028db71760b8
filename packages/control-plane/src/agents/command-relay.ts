import { randomUUID } from "node:crypto";
import { type Db, StatementBatch } from "@keelson/db";
import {
  CommandErrorCode,
  type CommandFrame,
  type CommandName,
  type CommandPayload,
  type CommandResult,
  checkCommandResult,
  type ResultFrame,
} from "@keelson/protocol";
import type { FastifyBaseLogger } from "fastify";
import type { CommandObserver } from "../metrics/observe.ts";
import type { Channels } from "../replicas/channels.ts";
import {
  type Answer,
  answerOf,
  expireCommand,
  type IssuedCommand,
  insertCommands,
  markSent,
  type NewCommand,
  pruneCommands,
  recordAnswers,
  releaseClaim,
  type SendableCommand,
  unsentCommands,
} from "../replicas/commands.ts";
import { CommandFailedError, CommandTimeoutError, HostOfflineError } from "./errors.ts";
import type { AgentSession } from "./sessions.ts";

/** The operation a command is issued for, and the fence of its claim (runner/leases.ts). */
export interface CommandIssuer {
  operationId: string;
  fence: number;
}

export interface CommandOptions {
  timeoutMs: number;
  /** A stable id (an operation's step): the agent runs an id once, whoever sends it again. */
  id?: string;
  issuer?: CommandIssuer;
}

export interface CommandRelayOptions {
  db: Db;
  channels: Channels;
  log: FastifyBaseLogger;
  /** This replica's open session of a host, if it holds its link. */
  sessionOf(hostId: string): AgentSession | undefined;
  observer?: CommandObserver | undefined;
  /** Answered and expired commands are deleted this long after their expiry. */
  retentionMs: number;
}

interface Waiter {
  hostId: string;
  name: CommandName;
  /** The fence of the claim it was last issued under (null: of no operation). */
  fence: number | null;
  timer: NodeJS.Timeout | undefined;
  resolve(result: unknown): void;
  reject(err: Error): void;
}

/**
 * Commands to agents through the agent_commands table (replicas/commands.ts), so that any
 * replica may issue one and the replica holding the host's link sends it:
 * - issue: the row is inserted; if this replica holds the link it sends it at once, otherwise
 *   the `commands` channel wakes the holder (the payload is the host's and the command's ids);
 * - an answer is written to the row by the holder; the issuer, if it is another replica, is
 *   woken on `commandResults` and reads it;
 * - each issue of a command is sent once: the send claims the row (pending to sent), so the
 *   issuer's own send, another replica's notice and a catch-up cannot each send it; issuing the
 *   id again (a step retried) makes it pending again, and it is sent again;
 * - a host that links (to any replica) gets its unanswered commands again, same ids: the agent
 *   answers a repeated id from its record;
 * - a command whose operation's fence moved on is never sent (checked as it is marked sent).
 * On SQLite the channels are in-process and the flow is the same.
 */
export class CommandRelay {
  private readonly waiting = new Map<string, Waiter>();
  /**
   * The result of each command issued here and not yet settled, by id: the same command issued
   * again with this id joins it. Removed once the result has settled (a microtask after), not
   * with the waiter: a step that retries at once after its wait ended still joins that result.
   */
  private readonly pending = new Map<string, Promise<unknown>>();
  private readonly inserts: StatementBatch<NewCommand, IssuedCommand | undefined>;
  private readonly sends: StatementBatch<string, SendableCommand | undefined>;
  private readonly answers: StatementBatch<Answer, boolean>;
  /** Answers other replicas recorded, read together (a rollout's batch answers within a few ms). */
  private readonly answerReads: StatementBatch<string, { result: unknown } | undefined>;
  /**
   * The unanswered commands of hosts that just linked, looked up together: after a restart of
   * the control plane every agent links again within seconds, a statement each otherwise.
   */
  private readonly relinks: StatementBatch<string, SendableCommand[]>;
  private readonly unlisten: (() => Promise<void>)[] = [];
  private pruning: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: CommandRelayOptions) {
    const { db } = options;
    this.inserts = new StatementBatch(async (rows) => {
      const issued = new Map((await insertCommands(db, rows)).map((r) => [r.id, r]));
      return rows.map((r) => issued.get(r.id));
    });
    this.sends = new StatementBatch(async (ids) => {
      const sent = new Map((await markSent(db, { ids })).map((r) => [r.id, r]));
      return ids.map((id) => sent.get(id));
    });
    this.answerReads = new StatementBatch(async (ids) => {
      const found = new Map((await answerOf(db, ids)).map((r) => [r.id, r]));
      return ids.map((id) => found.get(id));
    });
    this.relinks = new StatementBatch(async (hostIds) => {
      const byHost = new Map<string, SendableCommand[]>();
      for (const row of await markSent(db, { hostIds })) {
        const list = byHost.get(row.hostId);
        if (list) list.push(row);
        else byHost.set(row.hostId, [row]);
      }
      return hostIds.map((hostId) => byHost.get(hostId) ?? []);
    });
    this.answers = new StatementBatch(
      async (answers) => {
        const recorded = await recordAnswers(db, answers);
        return answers.map((a) => recorded.has(a.id));
      },
      { keyOf: (a) => a.id },
    );
  }

  /** Listens on the channels; each (re)subscription catches up on what may have been missed. */
  async listen(): Promise<void> {
    const { channels } = this.options;
    this.unlisten.push(
      await channels.listen(
        "commands",
        (payload) => this.onIssued(payload),
        () => void this.catchUp(),
      ),
      await channels.listen(
        "commandResults",
        (id) => void this.settleFromRows([id]),
        () => void this.settleFromRows([...this.waiting.keys()]),
      ),
    );
    const prune = () =>
      pruneCommands(this.options.db, this.options.retentionMs).catch((err: unknown) =>
        this.options.log.warn({ err }, "pruning answered agent commands failed"),
      );
    this.pruning = setInterval(prune, Math.min(60_000, this.options.retentionMs)).unref();
  }

  isWaiting(id: string): boolean {
    return this.waiting.has(id);
  }

  /** Issues a command and resolves with its validated result (rejections: errors.ts). */
  issue<N extends CommandName>(
    hostId: string,
    name: N,
    payload: CommandPayload<N>,
    options: CommandOptions,
  ): Promise<CommandResult<N>> {
    const id = options.id ?? randomUUID();
    const row: NewCommand = {
      id,
      hostId,
      name,
      payload,
      timeoutMs: options.timeoutMs,
      operationId: options.issuer?.operationId ?? null,
      fence: options.issuer?.fence ?? null,
    };
    // A step retried after a database outage issues the same stable id again: it joins the wait
    // (the agent gets it once). If the retry comes under a newer claim of its operation (the
    // lease was lost meanwhile), the row is issued again under it, with the new step's timeout:
    // a row still carrying the old claim's fence is never sent.
    const pending = this.pending.get(id);
    if (pending) {
      const waiter = this.waiting.get(id);
      if (waiter && waiter.fence !== row.fence) {
        waiter.fence = row.fence;
        this.arm(id, waiter, options.timeoutMs);
        this.record(row);
      }
      return pending as Promise<CommandResult<N>>;
    }
    const result = new Promise<CommandResult<N>>((resolve, reject) => {
      const waiter: Waiter = {
        hostId,
        name,
        fence: row.fence,
        timer: undefined,
        resolve: resolve as (r: unknown) => void,
        reject,
      };
      this.waiting.set(id, waiter);
      this.arm(id, waiter, options.timeoutMs);
    });
    this.record(row);
    this.pending.set(id, result);
    result.then(
      () => this.pending.delete(id),
      () => this.pending.delete(id),
    );
    return this.options.observer ? observed(name, result, this.options.observer) : result;
  }

  /** (Re)starts a waiter's timeout: it ends `timeoutMs` from now unless answered first. */
  private arm(id: string, waiter: Waiter, timeoutMs: number): void {
    clearTimeout(waiter.timer);
    waiter.timer = setTimeout(() => {
      if (!this.forget(id)) return;
      // Recorded before the caller hears of it: whoever looks then sees it will not be sent.
      void expireCommand(this.options.db, id)
        .catch(() => undefined)
        .then(() => waiter.reject(new CommandTimeoutError(waiter.hostId, waiter.name, timeoutMs)));
    }, timeoutMs);
  }

  /** Writes the command's row, then sends it if this replica holds the host's link. */
  private record(command: NewCommand): void {
    const { id, hostId } = command;
    // Linked here: the insert claims it as sent (its fence checked there), no markSent after.
    const row = { ...command, claim: this.options.sessionOf(hostId) !== undefined };
    this.inserts.add(row).then(
      (issued) => this.afterInsert(row, issued),
      (err: unknown) => {
        // The table refuses writes (a full disk, the database away): a command of no operation
        // still goes out on this replica's own link, not durable; an operation's waits for the
        // table (its fence must be checked).
        const session = this.options.sessionOf(hostId);
        if (row.operationId !== null || !session) return this.fail(id, err);
        this.options.log.warn({ err, id, hostId }, "could not record a command; sending it on this link only");
        session.sendCommand(frameOf(row));
      },
    );
  }

  /** An agent's result frame, on this replica's link of `hostId`. */
  onResult(hostId: string, frame: ResultFrame): void {
    const { type: _type, ...result } = frame;
    this.answers.add({ id: frame.id, hostId, result }).then(
      (recorded) => {
        if (!recorded) {
          // Late (after a timeout was recorded elsewhere), repeated, or another host's id.
          this.options.log.debug({ hostId, id: frame.id }, "result ignored");
          return;
        }
        const waiter = this.waiting.get(frame.id);
        if (waiter?.hostId === hostId) this.settle(frame.id, result);
        else if (!waiter) void this.notify("commandResults", frame.id);
      },
      (err: unknown) => {
        this.options.log.warn({ err, hostId, id: frame.id }, "could not record an agent's result");
        // Issued here: it is answered all the same (the row, if any, stays unanswered).
        if (this.waiting.get(frame.id)?.hostId === hostId) this.settle(frame.id, result);
      },
    );
  }

  /** A host linked here: its unanswered commands go out again, same ids. */
  async onLinked(session: AgentSession): Promise<void> {
    const rows = await this.relinks.add(session.hostId);
    for (const row of rows) session.sendCommandUnlessCarried(frameOf(row));
  }

  /** Stops waiting: every command issued here fails (the rows stay for whoever issues them again). */
  async close(why: string): Promise<void> {
    this.closed = true;
    clearInterval(this.pruning);
    for (const [id, waiter] of [...this.waiting]) {
      this.forget(id);
      waiter.reject(new HostOfflineError(waiter.hostId, why));
    }
    for (const unlisten of this.unlisten.splice(0)) await unlisten().catch(() => undefined);
  }

  private afterInsert(row: NewCommand, issued: IssuedCommand | undefined): void {
    const { id, hostId } = row;
    if (!this.waiting.has(id)) return;
    if (issued?.state === "answered") {
      // Issued before (a step run again) and answered then: the agent would answer the same.
      this.settle(id, issued.result);
      return;
    }
    const session = this.options.sessionOf(hostId);
    if (row.claim && issued?.state === "sent") {
      if (session?.sendCommand(frameOf(row))) return;
      // The link went away during the insert: a link that came up elsewhere meanwhile may have
      // looked for the host's commands before this row was there, so it goes back to pending
      // for whoever holds the link now.
      void this.unclaim(id, hostId);
      return;
    }
    if (session) void this.send(id, session);
    else void this.notify("commands", `${hostId} ${id}`);
  }

  private async unclaim(id: string, hostId: string): Promise<void> {
    try {
      await releaseClaim(this.options.db, id);
    } catch (err) {
      this.options.log.warn({ err, id, hostId }, "could not put a command back to pending");
      return;
    }
    const session = this.options.sessionOf(hostId);
    if (session) await this.send(id, session);
    else await this.notify("commands", `${hostId} ${id}`);
  }

  private onIssued(payload: string): void {
    const [hostId, id] = payload.split(" ");
    if (!hostId || !id) return;
    const session = this.options.sessionOf(hostId);
    if (session) void this.send(id, session);
  }

  private async send(id: string, session: AgentSession): Promise<void> {
    try {
      const row = await this.sends.add(id);
      if (row) session.sendCommand(frameOf(row));
    } catch (err) {
      this.options.log.warn({ err, id, hostId: session.hostId }, "could not mark a command sent");
    }
  }

  private async catchUp(): Promise<void> {
    try {
      for (const row of await unsentCommands(this.options.db)) {
        const session = this.options.sessionOf(row.hostId);
        if (session) void this.send(row.id, session);
      }
      await this.settleFromRows([...this.waiting.keys()]);
    } catch (err) {
      this.options.log.warn({ err }, "could not catch up on agent commands");
    }
  }

  /** Settles the commands issued here that another replica recorded answers for (one read per batch). */
  private async settleFromRows(ids: string[]): Promise<void> {
    const reads = ids
      .filter((id) => this.waiting.has(id))
      .map(async (id) => {
        const row = await this.answerReads.add(id);
        if (row) this.settle(id, row.result);
      });
    const failed = (await Promise.allSettled(reads)).find((r) => r.status === "rejected");
    if (failed) this.options.log.warn({ err: failed.reason }, "could not read agents' answers");
  }

  private async notify(channel: "commands" | "commandResults", payload: string): Promise<void> {
    if (this.closed) return;
    await this.options.channels
      .notify(channel, payload)
      .catch((err: unknown) => this.options.log.warn({ err, channel }, "could not notify the other replicas"));
  }

  /** Settles a waiting command from its recorded answer (`{ok, result}` or `{ok: false, error}`). */
  private settle(id: string, answer: unknown): void {
    const waiter = this.waiting.get(id);
    if (!waiter || !this.forget(id)) return;
    const a = answer as { ok: true; result: unknown } | { ok: false; error: { code: string; message: string } };
    if (!a.ok) {
      waiter.reject(new CommandFailedError(waiter.hostId, waiter.name, a.error.code, a.error.message));
      return;
    }
    const problem = checkCommandResult(waiter.name, a.result);
    if (problem)
      waiter.reject(new CommandFailedError(waiter.hostId, waiter.name, CommandErrorCode.BAD_RESULT, problem));
    else waiter.resolve(a.result);
  }

  private fail(id: string, err: unknown): void {
    const waiter = this.waiting.get(id);
    if (!waiter || !this.forget(id)) return;
    waiter.reject(err instanceof Error ? err : new Error(String(err)));
  }

  private forget(id: string): boolean {
    const waiter = this.waiting.get(id);
    if (!waiter) return false;
    clearTimeout(waiter.timer);
    this.waiting.delete(id);
    return true;
  }
}

function frameOf(row: SendableCommand | NewCommand): CommandFrame {
  return {
    type: "command",
    id: row.id,
    name: row.name,
    payload: row.payload,
    timeoutMs: row.timeoutMs,
  } as CommandFrame;
}

/** Tells the metrics of a command sent and how it ended. */
function observed<T>(name: string, result: Promise<T>, observer: CommandObserver): Promise<T> {
  const sentAt = performance.now();
  observer.sent(name);
  const seconds = () => (performance.now() - sentAt) / 1000;
  return result.then(
    (value) => {
      observer.settled(name, "succeeded", seconds());
      return value;
    },
    (err: unknown) => {
      observer.settled(name, err instanceof CommandTimeoutError ? "timeout" : "failed", seconds());
      throw err;
    },
  );
}
