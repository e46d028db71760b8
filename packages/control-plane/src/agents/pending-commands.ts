import { randomUUID } from "node:crypto";
import {
  CommandErrorCode,
  type CommandFrame,
  type CommandName,
  type CommandPayload,
  type CommandResult,
  checkCommandResult,
  type ResultFrame,
} from "@keelson/protocol";
import { CommandFailedError, CommandTimeoutError } from "./errors.ts";

interface Pending {
  hostId: string;
  frame: CommandFrame;
  resolve(result: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export type SettleOutcome = "settled" | "unknown" | "wrong-host";

/**
 * Commands sent to agents and not answered yet. Each id settles exactly once: by its first
 * result, by its timeout, or by rejectAll; anything after that is reported as "unknown" and
 * dropped. A command outlives the socket it was sent on, so it can be re-delivered when the
 * host reconnects before the timeout (the agent recognises the id and does not run it twice).
 */
export class PendingCommands {
  private readonly byId = new Map<string, Pending>();
  private readonly byHost = new Map<string, Set<string>>();

  create<N extends CommandName>(
    hostId: string,
    name: N,
    payload: CommandPayload<N>,
    timeoutMs: number,
    id: string = randomUUID(),
  ): { frame: CommandFrame; result: Promise<CommandResult<N>> } {
    const frame = { type: "command", id, name, payload, timeoutMs } as CommandFrame;
    const result = new Promise<CommandResult<N>>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.remove(id)) reject(new CommandTimeoutError(hostId, name, timeoutMs));
      }, timeoutMs);
      this.byId.set(id, { hostId, frame, resolve: resolve as (r: unknown) => void, reject, timer });
      const ids = this.byHost.get(hostId) ?? new Set<string>();
      ids.add(id);
      this.byHost.set(hostId, ids);
    });
    return { frame, result };
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Applies an agent's result frame; only the host the command went to may answer it. */
  settle(hostId: string, frame: ResultFrame): SettleOutcome {
    const pending = this.byId.get(frame.id);
    if (!pending) return "unknown";
    if (pending.hostId !== hostId) return "wrong-host";
    this.remove(frame.id);
    const name = pending.frame.name;
    if (!frame.ok) {
      pending.reject(new CommandFailedError(hostId, name, frame.error.code, frame.error.message));
      return "settled";
    }
    const problem = checkCommandResult(name, frame.result);
    if (problem) {
      pending.reject(new CommandFailedError(hostId, name, CommandErrorCode.BAD_RESULT, problem));
    } else {
      pending.resolve(frame.result);
    }
    return "settled";
  }

  /** Unanswered commands of a host, oldest first, to re-deliver after it reconnects. */
  forHost(hostId: string): CommandFrame[] {
    const ids = this.byHost.get(hostId);
    if (!ids) return [];
    return [...ids].map((id) => (this.byId.get(id) as Pending).frame);
  }

  get size(): number {
    return this.byId.size;
  }

  /** Settles every pending command with `errorFor(hostId)` (used when the hub closes). */
  rejectAll(errorFor: (hostId: string) => Error): void {
    for (const [id, pending] of [...this.byId]) {
      this.remove(id);
      pending.reject(errorFor(pending.hostId));
    }
  }

  private remove(id: string): boolean {
    const pending = this.byId.get(id);
    if (!pending) return false;
    clearTimeout(pending.timer);
    this.byId.delete(id);
    const ids = this.byHost.get(pending.hostId);
    ids?.delete(id);
    if (ids?.size === 0) this.byHost.delete(pending.hostId);
    return true;
  }
}
