import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { serializeError } from "../src/storage/log-errors.ts";

/** A logger as main.ts makes it, writing into a string. */
function logged(write: (log: pino.Logger) => void): string {
  let out = "";
  const sink = new Writable({
    write(chunk, _enc, done) {
      out += chunk.toString();
      done();
    },
  });
  write(pino({ serializers: { err: serializeError } }, sink));
  return out;
}

/** What drizzle throws for a statement the driver refused: the statement and its parameters, the driver's error as cause. */
function queryError(code: string, message: string): Error {
  const cause = Object.assign(new Error(message), { code });
  return new Error(`Failed query: insert into events ... \nparams: the-secret-payload`, { cause });
}

describe("the log's err serializer", () => {
  it("logs a full disk or an absent database by its reason alone: no parameters, no stack", () => {
    const out = logged((log) => log.warn({ err: queryError("SQLITE_FULL", "database or disk is full") }, "refused"));
    const line = JSON.parse(out);
    expect(line.err).toEqual({ type: "Error", reason: "database: database or disk is full (SQLITE_FULL)" });
    expect(out).not.toMatch(/the-secret-payload|"stack"|\n\s+at /);
    const away = JSON.parse(logged((log) => log.warn({ err: queryError("57P01", "terminating connection") }, "x")));
    expect(away.err.reason).toBe("database: terminating connection (57P01)");
  });

  it("keeps pino's form, stack and all, for any other error", () => {
    const line = JSON.parse(logged((log) => log.error({ err: queryError("SQLITE_CONSTRAINT", "bad") }, "defect")));
    expect(line.err.type).toBe("Error");
    expect(line.err.message).toContain("Failed query");
    expect(line.err.stack).toMatch(/\n\s+at /);
  });
});
