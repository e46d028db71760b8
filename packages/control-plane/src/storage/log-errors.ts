import { databaseUnavailable } from "@keelson/db";
import pino from "pino";

/**
 * The `err` of every log line (main.ts's logger). A database that is away or whose disk is full
 * is a condition to wait out, not a defect: its error is logged as its reason alone. Drizzle's
 * error carries the statement's parameters (cluster specs, events, tokens' hashes) and a stack,
 * and neither belongs in an operator's log for a full disk. Anything else keeps pino's form.
 * The net under every log line; logWriteFailure (log-failure.ts) still chooses a background
 * write's level and words.
 */
export function serializeError(err: unknown): unknown {
  const reason = databaseUnavailable(err);
  if (reason) return { type: (err as Error | undefined)?.name ?? "Error", reason };
  return err instanceof Error ? pino.stdSerializers.err(err) : err;
}
