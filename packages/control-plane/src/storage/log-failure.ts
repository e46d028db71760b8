import { storageFull } from "@keelson/db";
import type { FastifyBaseLogger } from "fastify";

/**
 * Logs a background write that failed. A full store is already the server's condition
 * (`/readyz`, the 507 answers), so it is one warning line naming the reason, not an error with a
 * stack; anything else is an error with its stack.
 */
export function logWriteFailure(
  log: FastifyBaseLogger,
  err: unknown,
  fields: Record<string, unknown>,
  message: string,
  // Writes that are retried on their own (the runner's lease renewal) warn rather than err.
  otherwise: "error" | "warn" = "error",
): void {
  const full = storageFull(err);
  if (full) log.warn({ ...fields, reason: full.reason }, `${message}: the store is full`);
  else log[otherwise]({ ...fields, err }, message);
}
