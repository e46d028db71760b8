import { readFileSync } from "node:fs";
import { type CommandError, CommandErrorCode } from "@keelson/protocol";
import { isNoSpace } from "../services/atomic-file.ts";
import { writeFileAtomic } from "../state-dir.ts";

export type CommandOutcome = { ok: true; result: unknown } | { ok: false; error: CommandError };

export interface RecordEntry {
  id: string;
  name: string;
  startedAt: string;
  /** Absent while the command runs. */
  outcome?: CommandOutcome;
}

/** File name inside the state dir. */
export const COMMAND_RECORD_FILE = "commands.json";
export const DEFAULT_RECORD_LIMIT = 500;

/**
 * The agent's memory of the commands it has run, persisted in the state dir so that a command
 * re-delivered after a reconnect, or after the agent itself restarted, is answered from here
 * instead of being run a second time. An id is written before its command runs: an entry
 * still running when the agent starts again was interrupted, and is answered INTERRUPTED.
 * Only the most recent `limit` ids are kept; the control plane times commands out long before
 * that many newer ones could push an id out.
 */
export class CommandRecord {
  private readonly entries = new Map<string, RecordEntry>();

  constructor(
    private readonly file: string,
    private readonly limit = DEFAULT_RECORD_LIMIT,
  ) {
    for (const entry of readEntries(file)) this.entries.set(entry.id, entry);
    let interrupted = false;
    for (const entry of this.entries.values()) {
      if (entry.outcome) continue;
      entry.outcome = {
        ok: false,
        error: { code: CommandErrorCode.INTERRUPTED, message: "the agent restarted while this command was running" },
      };
      interrupted = true;
    }
    if (interrupted) this.save();
  }

  get(id: string): RecordEntry | undefined {
    return this.entries.get(id);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Records that `id` is about to run (persisted before the handler starts). */
  start(id: string, name: string, now = new Date()): void {
    this.entries.delete(id);
    this.entries.set(id, { id, name, startedAt: now.toISOString() });
    // Maps iterate in insertion order: the first keys are the oldest.
    while (this.entries.size > this.limit) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    this.save();
  }

  finish(id: string, outcome: CommandOutcome): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    entry.outcome = outcome;
    this.save();
  }

  /**
   * On a full state dir the record lives on in memory (re-deliveries on this run are still
   * answered from it) and the file keeps its last whole content; the next save writes it all.
   * The command itself is not refused: the control plane cannot tell that apart from a failure.
   */
  private save(): void {
    try {
      writeFileAtomic(this.file, `${JSON.stringify([...this.entries.values()])}\n`, 0o600);
    } catch (err) {
      if (!isNoSpace(err)) throw err;
    }
  }
}

function readEntries(file: string): RecordEntry[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter(
      (e): e is RecordEntry =>
        typeof e === "object" && e !== null && typeof e.id === "string" && typeof e.name === "string",
    );
  } catch {
    // Written atomically, so unreadable means edited by hand: start afresh rather than refuse to run.
    return [];
  }
}
