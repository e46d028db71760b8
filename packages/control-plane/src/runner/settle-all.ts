import { databaseUnavailable } from "@keelson/db";
import { OperationInterrupted } from "./types.ts";

/**
 * Waits for work on several nodes at once and says how it went, in one place for every step
 * that fans out: an interruption wins (the operation resumes at the next start), then the
 * database being away (no node's failure: the runner waits for it and runs the step again),
 * then one failure as it is, or several summed up as "N of TOTAL <what>: the first three
 * reasons; and M more".
 */
export async function settleAll(what: string, total: number, tasks: Promise<unknown>[]): Promise<void> {
  const errors = (await Promise.allSettled(tasks)).flatMap((r) =>
    r.status === "rejected" ? [r.reason instanceof Error ? r.reason : new Error(String(r.reason))] : [],
  );
  if (errors.some((e) => e instanceof OperationInterrupted)) throw new OperationInterrupted();
  const away = errors.find((e) => databaseUnavailable(e));
  if (away) throw away;
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    const shown = errors.slice(0, 3).map((e) => e.message);
    const more = errors.length > 3 ? `; and ${errors.length - 3} more` : "";
    throw new Error(`${errors.length} of ${total} ${what}: ${shown.join("; ")}${more}`);
  }
}
